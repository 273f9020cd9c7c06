/**
 * Why nothing is shown, in the real VS Code workbench (code-server + the packaged .vsix, Playwright): the status bar
 * item goes from the model's load to the active document's last next-edit outcome: withheld under the user's gate
 * (with the confidence and the gate in force), shown once the gate is 0, disabled once Python is switched off
 * (settings changes reach the workbench through its settings file and a window reload); the
 * "Explain the Last Request Here" command says what was sent (sizes) and what came back.
 *
 * The server runs through the test-only launcher (DGEMMA_LSP_TESTING_CMD), whose scripted answers
 * (DGEMMA_LSP_SCRIPT_NEXT_EDIT) replace the text of its canvas: the real canvas, gate and protocol still run.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { serverSettings, until, Workbench } from './workbench';

const SOURCE = ['def area(r):', '    return 3.14 * r * r', '', '', 'def double(r):', '    return 2 * r', ''];
const want = [...SOURCE];
want[0] = 'def area(radius):';
want[1] = '    return 3.14 * radius * radius';
const answer = want.slice(0, 7).join('\n');
const wantB = [...want];
wantB[4] = 'def double(radius):';
wantB[5] = '    return 2 * radius';
const answerB = wantB.slice(0, 7).join('\n');

describe('why nothing is shown, in code-server', { timeout: 420_000 }, () => {
  const wb = new Workbench();
  const settings = {
    ...serverSettings('DGEMMA_LSP_TESTING_CMD'),
    'dgemma.server.env': { DGEMMA_LSP_SCRIPT_NEXT_EDIT: JSON.stringify([answer, answer, answer, answer]) },
    'dgemma.minConfidence': 0.99,
    'dgemma.inlineCompletion': false,
    'editor.inlineSuggest.enabled': false,
    'editor.autoClosingBrackets': 'never',
  };

  before(async () => {
    await wb.start(settings, { 'area.py': SOURCE.join('\n') });
  });

  after(async () => {
    await wb.close();
  });

  it('status: loading -> withheld (confidence < gate) -> shown -> disabled; explain gives sizes', async () => {
    const page = wb.page;
    try {
      await wb.openFile('area.py');
      const status = page.locator('.statusbar-item', { hasText: 'dgemma' }).first();
      await status.waitFor({ timeout: 60_000 });
      const seen = new Set<string>();
      const ready = await until(
        180_000,
        async () => {
          const t = ((await status.textContent()) ?? '').trim();
          seen.add(t);
          return /dgemma: transformers · cpu/.test(t);
        },
        50,
      );
      console.log(`status bar while starting: ${[...seen].join(' | ')}`);
      assert.ok(ready, `the model did not load: ${await status.textContent()}`);
      assert.ok([...seen].some((t) => /loading|starting/.test(t)), `no loading state seen: ${[...seen].join(' | ')}`);

      // withheld: rename r -> radius on line 1; the pause asks; the right answer is under the gate 0.99
      await page.keyboard.press('Control+G');
      await page.keyboard.type('1:10');
      await page.keyboard.press('Enter');
      await page.keyboard.press('Shift+ArrowRight');
      await page.keyboard.type('radius', { delay: 40 });
      const withheld = await until(60_000, async () => {
        const t = (await status.textContent()) ?? '';
        return /withheld \d\.\d\d < 0\.99/.test(t) && t;
      });
      await wb.shot('outcome-withheld');
      assert.ok(withheld, `the status did not say withheld under the gate: ${await status.textContent()}`);

      await wb.runCommand('DiffusionGemma: Explain the Last Request Here');
      const explained = await until(15_000, async () => {
        const n = (await wb.notifications()).join('\n');
        return /nextEdit: withheld/.test(n) && n;
      });
      assert.ok(explained, `explain said nothing: ${(await wb.notifications()).join(' | ')}`);

      // shown: the user sets the gate to 0 (the settings file, then a window reload, as a user's edit of
      // settings.json is picked up here) and renames double's parameter too
      await page.keyboard.press('Control+S');
      wb.writeSettings({
        ...settings,
        'dgemma.minConfidence': 0,
        'dgemma.server.env': { DGEMMA_LSP_SCRIPT_NEXT_EDIT: JSON.stringify([answerB, answerB]) },
      });
      await page.waitForTimeout(1500); // the workbench reads the rewritten settings file before the reload
      await wb.reloadWindow();
      await wb.openFile('area.py');
      const back = await until(120_000, async () => /dgemma: transformers · cpu/.test((await status.textContent()) ?? ''));
      assert.ok(back, `the model did not load again: ${await status.textContent()}`);
      await page.keyboard.press('Control+G');
      await page.keyboard.type('5:12');
      await page.keyboard.press('Enter');
      await page.keyboard.press('Shift+ArrowRight');
      await page.keyboard.type('radius', { delay: 40 });
      const shown = await until(60_000, async () => {
        const t = (await status.textContent()) ?? '';
        return /· shown/.test(t) && t;
      });
      await wb.shot('outcome-shown');
      assert.ok(shown, `the status did not say shown: ${await status.textContent()}`);
      await page.keyboard.press('Escape');
      await page.keyboard.press('Control+S');

      // disabled: Python switched off
      wb.writeSettings({ ...settings, 'dgemma.minConfidence': 0, 'dgemma.enable': { python: false } });
      await page.waitForTimeout(1500); // the workbench reads the rewritten settings file before the reload
      await wb.reloadWindow();
      await wb.openFile('area.py');
      const again = await until(120_000, async () => /dgemma: transformers · cpu/.test((await status.textContent()) ?? ''));
      assert.ok(again, `the model did not load again: ${await status.textContent()}`);
      const disabled = await until(60_000, async () => {
        await page.keyboard.press('Alt+N');
        await page.waitForTimeout(1000);
        const t = (await status.textContent()) ?? '';
        return /· disabled/.test(t) && t;
      }, 500);
      await wb.shot('outcome-disabled');
      assert.ok(disabled, `the status did not say disabled: ${await status.textContent()}`);
    } catch (err) {
      await wb.shot('outcome-failure');
      throw err;
    }
  });
});
