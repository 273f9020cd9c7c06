-- A new user's first start without the server installed: the documented setup({}) from a plugin copy with no
-- .venv next to it and no dgemma-lsp on PATH must say so once, visibly, with what to do (not only in :LspLog).
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_nvim012_no_server.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')
local api = vim.api

H.run(function()
  local notes = {}
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    notes[#notes + 1] = { msg = tostring(msg), level = level or vim.log.levels.INFO }
    return notify(msg, level, opts)
  end
  H.check('dgemma-lsp is not on PATH', vim.fn.executable('dgemma-lsp') == 0, vim.env.PATH)
  local dgemma = H.load_plugin()
  dgemma.setup({})
  vim.cmd.edit(vim.fn.fnameescape(H.write_file('calc.py', 'def add(a, b):\n    return \n')))
  vim.cmd.edit(vim.fn.fnameescape(H.write_file('notes.json', '{"a": 1,}\n')))
  H.sleep(2000) -- what a start attempt would have needed to fail and report
  local visible = {}
  for _, n in ipairs(notes) do
    if n.level >= vim.log.levels.WARN then
      visible[#visible + 1] = n.msg
    end
  end
  H.check('exactly one visible message', #visible == 1, vim.inspect(notes))
  local msg = visible[1]
  H.log('message: %s', msg)
  H.check('it names the missing server', msg:find('dgemma-lsp not found', 1, true) ~= nil, msg)
  H.check('it says how to install it', msg:find('scripts/setup', 1, true) ~= nil, msg)
  H.check('it says how to point the plugin at it', msg:find('cmd = {', 1, true) ~= nil, msg)
  H.check('no client was started', #dgemma.clients() == 0)
  vim.cmd('checkhealth dgemma')
  local report = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  H.check('checkhealth names it as an error', report:find('dgemma-lsp not found', 1, true) ~= nil, report)
end)
