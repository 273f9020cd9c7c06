-- Neovim 0.11 graceful fallback: the plugin still attaches, says once that ghost text needs 0.12, maps no inline
-- keys (so <Tab> keeps its meaning), diagnostics and the fix-structure code action still work, and
-- :checkhealth dgemma reports the version limit, the doctor output and the running server.
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_nvim011.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')
local api = vim.api

H.run(function()
  H.check('neovim is older than 0.12', vim.fn.has('nvim-0.12') == 0, tostring(vim.version()))
  local notes = {}
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    notes[#notes + 1] = { msg = msg, level = level }
    return notify(msg, level, opts)
  end
  local dgemma = H.load_plugin()
  H.check('inline completion reported unavailable', not dgemma.has_inline_completion())
  dgemma.setup({ cmd = H.server_cmd() })

  local broken = '{\n  "name": "demo",\n  "tags": ["a", "b",],\n  "nested": {"ok": true\n}\n'
  local json = H.write_file('broken.json', broken)
  vim.cmd.edit(vim.fn.fnameescape(json))
  local buf = api.nvim_get_current_buf()
  local client = H.wait(60000, function()
    local c = dgemma.clients(buf)[1]
    return c and c.initialized and c
  end)
  H.check('plugin attached dgemma-lsp on 0.11', client ~= nil)
  local warned
  for _, n in ipairs(notes) do
    if n.msg:find('needs Neovim 0.12', 1, true) then
      warned = n
    end
  end
  H.check('user told that ghost text needs 0.12', warned ~= nil, vim.inspect(notes))
  H.check('told at WARN level', warned.level == vim.log.levels.WARN)
  local tab = vim.fn.maparg('<Tab>', 'i', false, true)
  H.check('<Tab> left alone (no buffer mapping of ours)', tab.buffer ~= 1, vim.inspect(tab))

  local diags = H.wait(30000, function()
    local d = vim.diagnostic.get(buf)
    return #d > 0 and d
  end)
  H.check('structure diagnostics published', diags ~= nil)
  api.nvim_win_set_cursor(0, { diags[1].lnum + 1, diags[1].col })
  dgemma.fix_structure()
  local fixed = H.wait(120000, function()
    local t = H.buf_text(buf)
    return t ~= broken:gsub('\n$', '') and t
  end)
  H.check('fix-structure code action applied on 0.11', fixed ~= nil)
  local ok, value = pcall(vim.json.decode, fixed)
  H.check('buffer is valid JSON after the fix', ok, not ok and value or nil)
  H.check('values kept', value.name == 'demo' and value.tags[2] == 'b' and value.nested.ok == true, vim.inspect(value))

  -- :checkhealth renders into a buffer; run it and read that buffer.
  vim.cmd('checkhealth dgemma')
  local report = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  H.log('checkhealth:\n%s', report)
  H.check('checkhealth warns about ghost text', report:find('needs Neovim 0.12', 1, true) ~= nil)
  H.check('checkhealth shows the server command', report:find('server command:', 1, true) ~= nil)
  H.check('checkhealth ran doctor', report:find('doctor', 1, true) ~= nil and report:find('transformers', 1, true) ~= nil)
  H.check('checkhealth reached the running server', report:find('server answers dgemma.status', 1, true) ~= nil)
  H.check('checkhealth reports no error', not report:find('ERROR', 1, true))
end)
