/**
 * Next-edit suggestions in the real VS Code workbench (code-server + the packaged .vsix, Playwright): the user
 * renames a parameter on a def line; after a pause the rest of the rename shows as a diff decoration at both sites
 * of the next line; escape dismisses it (the text stays as it was); alt+n asks again, alt+y applies every site, and
 * alt+j goes to the next site the server names.
 *
 * The tiny test model has random weights, so the server runs through the test-only launcher
 * (DGEMMA_LSP_TESTING_CMD, tests/support/lsp_launcher.py), whose scripted answers (DGEMMA_LSP_SCRIPT_NEXT_EDIT)
 * replace the text of its canvas: the real canvas, judge and protocol still run.
 *
 * Env: as workbench.ts, plus DGEMMA_LSP_TESTING_CMD (the launcher's command line, JSON).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { serverSettings, until, Workbench } from './workbench';

const CIRCLE = [
  'import math',
  '',
  '',
  'def area(r):',
  '    return math.pi * r * r',
  '',
  '',
  'def scaled(r, k):',
  '    return area(r) * k',
  '',
  '',
  'def label():',
  "    return 'circle'",
  '',
  '',
  'def volume(r, h):',
  '    return math.pi * r * r * h',
  '',
];
const renamed = [...CIRCLE];
renamed[3] = 'def area(radius):';
const want = [...renamed];
want[4] = '    return math.pi * radius * radius';
// The region the server picks for the cursor on line 4: the whole file (the sites of the old name r reach its end).
const answer = want.join('\n');

describe('next edits in code-server', { timeout: 420_000 }, () => {
  const wb = new Workbench();

  before(async () => {
    await wb.start(
      {
        // the server through the test-only launcher (tests/support/lsp_launcher.py), with two scripted answers:
        // one to dismiss, one to accept
        ...serverSettings('DGEMMA_LSP_TESTING_CMD'),
        'dgemma.server.env': { DGEMMA_LSP_SCRIPT_NEXT_EDIT: JSON.stringify([answer, answer]) },
        'editor.inlineSuggest.enabled': false, // ghost text would share the escape key
        'editor.autoClosingBrackets': 'never',
      },
      { 'circle.py': CIRCLE.join('\n') },
    );
  });

  after(async () => {
    await wb.close();
  });

  /** The texts the decorations put after the edited places (their ::after content), in document order. */
  async function shownInserts(): Promise<string[]> {
    return wb.page.evaluate(() => {
      const g = globalThis as unknown as {
        document: { querySelectorAll(s: string): Iterable<object> };
        getComputedStyle(e: object, pseudo: string): { content: string };
      };
      const out: string[] = [];
      for (const el of g.document.querySelectorAll('.editor-instance .monaco-editor .view-lines span')) {
        const c = g.getComputedStyle(el, '::after').content;
        if (c && c !== 'none' && c !== 'normal') out.push(c.replace(/^"|"$/g, ''));
      }
      return out;
    });
  }

  async function saved(): Promise<string> {
    await wb.page.keyboard.press('Control+S');
    await wb.page.waitForTimeout(500);
    return readFileSync(join(wb.ws, 'circle.py'), 'utf8');
  }

  it('shows the rest of a rename as a diff decoration; escape dismisses, alt+y applies, alt+j goes on', async () => {
    const page = wb.page;
    try {
      await wb.openFile('circle.py');
      const status = page.locator('.statusbar-item', { hasText: 'dgemma' }).first();
      const ready = await until(180_000, async () => /dgemma: transformers · cpu/.test((await status.textContent()) ?? ''));
      assert.ok(ready, `the model did not load: ${await status.textContent()}`);

      // 1. rename r -> radius on line 4 (Go to Line 4:10, select the r, type); the pause asks for a next edit
      await page.keyboard.press('Control+G');
      await page.keyboard.type('4:10');
      await page.keyboard.press('Enter');
      await page.keyboard.press('Shift+ArrowRight');
      await page.keyboard.type('radius', { delay: 40 });
      const shown = await until(60_000, async () => {
        const ins = await shownInserts();
        return ins.length > 0 && ins;
      });
      await wb.shot('next-edit-shown');
      // minimal edits: "r" -> "radius" keeps the r and inserts "adius" after it, at both sites of line 5
      assert.deepEqual(shown, ['adius', 'adius'], 'the next edit was not shown at both sites');
      assert.equal(await saved(), renamed.join('\n'), 'showing a next edit changed the text');

      // 2. escape dismisses: the decoration goes, the text stays
      await page.keyboard.press('Escape');
      const gone = await until(10_000, async () => (await shownInserts()).length === 0);
      assert.ok(gone, 'escape did not dismiss the next edit');
      assert.equal(await saved(), renamed.join('\n'), 'dismissing changed the text');

      // 3. alt+n asks again; alt+y applies every site
      await page.keyboard.press('Alt+N');
      const again = await until(60_000, async () => {
        const ins = await shownInserts();
        return ins.length > 0 && ins;
      });
      assert.deepEqual(again, ['adius', 'adius'], 'alt+n did not show the next edit');
      await page.keyboard.press('Alt+Y');
      const applied = await until(10_000, async () => {
        const text = await saved();
        return text === want.join('\n') && text;
      });
      await wb.shot('next-edit-accepted');
      assert.equal(applied, want.join('\n'), 'alt+y did not apply the next edit');
      assert.deepEqual(await shownInserts(), [], 'the decoration stayed after the accept');

      // 4. alt+j goes to the next site the server named: the next r after the edit, in def scaled(r, k) on line 8
      const jumped = await until(15_000, async () => {
        await page.keyboard.press('Alt+J');
        await page.waitForTimeout(300);
        return /Ln 8, Col 12/.test(await wb.cursorLabel());
      }, 500);
      assert.ok(jumped, `alt+j did not go to the next site: ${await wb.cursorLabel()}`);
    } catch (err) {
      await wb.shot('next-edit-failure');
      throw err;
    }
  });
});
