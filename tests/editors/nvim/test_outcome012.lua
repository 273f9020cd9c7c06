-- Neovim 0.12: why a next edit is shown or not, in the statusline, :DgemmaExplain and :checkhealth, across the
-- states a user meets: loading -> withheld (under the gate in force, with its confidence) -> shown -> disabled.
-- The server runs through the test-only launcher (the tiny model's canvas runs; the answer's text is scripted).
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_outcome012.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')
local api = vim.api

local SOURCE = { 'def area(r):', '    return 3.14 * r * r', '', '', 'def double(r):', '    return 2 * r' }

H.run(function()
  local dgemma = H.load_plugin()
  dgemma.setup({
    cmd = H.server_cmd(),
    inline_completion = false,
    settings = { canvasLength = 192, denoisingSteps = 4, maxPrefixTokens = 128, maxSuffixTokens = 64, minConfidence = 0.99 },
    next_edit = { auto = false },
  })
  local ne = require('dgemma.next_edit')
  local path = H.write_file('area.py', table.concat(SOURCE, '\n') .. '\n')
  vim.cmd.edit(vim.fn.fnameescape(path))
  local buf = api.nvim_get_current_buf()
  local client = H.wait(60000, function()
    local c = dgemma.clients(buf)[1]
    return c and c.initialized and c
  end, 5)
  H.check('plugin attached dgemma-lsp', client ~= nil)
  local function command(name, ...)
    local res = client:request_sync('workspace/executeCommand', { command = name, arguments = { ... } }, 10000, buf)
    return res and res.result
  end
  local function ask()
    local done
    ne.request(buf, function(r)
      done = r or {}
    end)
    return H.wait(60000, function()
      return done
    end, 20)
  end

  -- 1. asked while the model loads ----------------------------------------------------------------------------
  local first = ask()
  local o = dgemma.outcome(buf)
  H.check('loading: the answer says the model is loading', first and first.reason and first.reason:find('loading', 1, true) ~= nil,
    vim.inspect(first))
  H.check('loading: statusline', dgemma.statusline():find('loading', 1, true) ~= nil, dgemma.statusline())
  H.check('loading: the outcome state', o and o.state == 'loading', vim.inspect(o))
  H.check('model ready', H.wait(60000, function()
    local s = command('dgemma.status')
    return s and s.backend.state == 'ready'
  end, 200) ~= nil)

  -- 2. withheld: the right answer, under the user's gate 0.99 ---------------------------------------------------
  api.nvim_buf_set_text(buf, 0, 9, 0, 10, { 'radius' })
  local want = vim.deepcopy(SOURCE)
  want[1] = 'def area(radius):'
  want[2] = '    return 3.14 * radius * radius'
  command('dgemma.test.scriptNextEdit', table.concat(want, '\n') .. '\n')
  api.nvim_win_set_cursor(0, { 1, 9 })
  local r = ask()
  o = dgemma.outcome(buf)
  H.log('withheld: %s / %s', vim.inspect(r and r.reason), dgemma.statusline())
  H.check('withheld: nothing drawn', #ne.marks(buf) == 0)
  H.check('withheld: statusline names confidence and gate',
    dgemma.statusline():match('^dgemma: withheld %d%.%d%d < 0%.99$') ~= nil, dgemma.statusline())
  local ex = dgemma.explain(buf)
  H.log('explain:\n%s', ex and ex.text)
  H.check('explain: the gate in force and sizes sent', ex and ex.text:find('gate in force 0.99', 1, true)
    and ex.text:find('regionLines', 1, true) and not ex.text:find('3.14', 1, true), ex and ex.text)

  -- 3. shown: the user sets minConfidence = 0 -----------------------------------------------------------------
  client:notify('workspace/didChangeConfiguration', { settings = { dgemma = { minConfidence = 0 } } })
  command('dgemma.test.scriptNextEdit', table.concat(want, '\n') .. '\n')
  ask()
  H.check('shown: drawn', #ne.marks(buf) > 0)
  H.check('shown: statusline', dgemma.statusline() == 'dgemma: shown', dgemma.statusline())
  ne.clear(buf)

  -- 4. disabled for Python ----------------------------------------------------------------------------------------
  client:notify('workspace/didChangeConfiguration', { settings = { dgemma = { minConfidence = 0, enable = { python = false } } } })
  r = ask()
  H.check('disabled: statusline', dgemma.statusline() == 'dgemma: disabled', dgemma.statusline())
  vim.cmd('DgemmaStatus')
  vim.cmd('checkhealth dgemma')
  local report = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  H.log('checkhealth:\n%s', report)
  H.check('checkhealth: the gate in force is the user setting',
    report:find('min_confidence 0, every suggestion shown (your minConfidence setting)', 1, true) ~= nil, report)
  H.check('checkhealth: the last suggestion and why', report:find('last suggestion in that buffer (nextEdit): disabled', 1, true) ~= nil, report)
  vim.cmd('tabclose')
end)
