-- A new user's first session in Neovim 0.12, driven like a person: the documented setup() without `cmd` finds the
-- repository's .venv server; Insert mode while the model loads (statusline "loading") gets ghost text once it is
-- ready without moving the cursor; the "suggest here" key gives several candidates to cycle; picking the model's
-- fix in the code action menu on a truncated JSON file shows why it failed and applies the deterministic fix;
-- :checkhealth reports the buffer the user came from and the gate in force; a file without a filetype attaches;
-- and the server's warnings never reach Neovim's LSP log as stderr [ERROR] lines.
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_nvim012_first_run.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')
local api = vim.api

--- Ghost text vim.lsp.inline_completion draws in `buf`: {row, col, text, hint} or nil.
local function ghost(buf)
  local ns = api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  if not ns then
    return nil
  end
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local d, hint = m[4], nil
    local function join(chunks)
      local parts = {}
      for _, chunk in ipairs(chunks or {}) do
        if chunk[2] == 'ComplHintMore' then
          hint = chunk[1]
        else
          parts[#parts + 1] = chunk[1]
        end
      end
      return table.concat(parts)
    end
    local lines = { join(d.virt_text) }
    for _, vl in ipairs(d.virt_lines or {}) do
      lines[#lines + 1] = join(vl)
    end
    local text = table.concat(lines, '\n')
    if text:match('%S') then
      return { row = m[2], col = m[3], text = text, hint = hint }
    end
  end
end

H.run(function()
  H.check('neovim is 0.12+', vim.fn.has('nvim-0.12') == 1, tostring(vim.version()))
  local notes = {}
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    notes[#notes + 1] = { msg = tostring(msg), level = level or vim.log.levels.INFO }
    return notify(msg, level, opts)
  end
  H.check('dgemma-lsp is not on PATH (no venv activated)', vim.fn.executable('dgemma-lsp') == 0)
  local dgemma = H.load_plugin()
  local attaches = {} -- which client attached where, for the one-client check's message
  api.nvim_create_autocmd('LspAttach', { callback = function(ev)
    attaches[#attaches + 1] = ('%d:%s'):format(ev.data.client_id, api.nvim_buf_get_name(ev.buf))
  end })
  local full = H.server_cmd()
  local args, log_file = {}, nil
  for i = 3, #full do -- what follows `dgemma-lsp --stdio`: the test checkpoint and the log file
    args[#args + 1] = full[i]
    if full[i - 1] == '--log-file' then
      log_file = full[i]
    end
  end
  dgemma.setup({ args = args, settings = { debounceMs = 0, minConfidence = 0 } })
  local cmd = dgemma.server_cmd(dgemma.config)
  H.check('server found in the plugin repository .venv', cmd[1] == dgemma.repo_dir() .. '/.venv/bin/dgemma-lsp', cmd[1])

  -- 1. Insert mode while the model loads, then ghost text without moving -------------------------------------
  local py = H.write_file('calc.py', 'def add(a, b):\n    """Add two numbers."""\n    return \n')
  vim.cmd.edit(vim.fn.fnameescape(py))
  local buf = api.nvim_get_current_buf()
  H.check('plugin attached dgemma-lsp', H.wait(60000, function()
    local c = dgemma.clients(buf)[1]
    return c and c.initialized
  end) ~= nil)
  local loading = H.wait(30000, function()
    local s = dgemma.statusline()
    return s:find('loading', 1, true) and s
  end, 20)
  H.check('statusline says loading while the model loads', loading ~= nil, dgemma.statusline())
  H.log('statusline: %s', loading)
  api.nvim_win_set_cursor(0, { 3, 0 })
  vim.cmd('startinsert!')
  H.wait(5000, function()
    return api.nvim_get_mode().mode == 'i'
  end)
  local cursor = api.nvim_win_get_cursor(0)
  H.check('Insert mode entered while the model still loads', dgemma.statusline():find('loading', 1, true) ~= nil,
    dgemma.statusline())
  local g = H.wait(150000, function() -- no cursor movement, no nudges: the plugin must ask again by itself
    return ghost(buf)
  end, 100)
  H.check('ghost text once the model is ready, without moving', g ~= nil)
  H.check('at the cursor', g.row == cursor[1] - 1 and g.col == cursor[2], vim.inspect({ g, cursor }))
  H.check('cursor did not move', vim.deep_equal(api.nvim_win_get_cursor(0), cursor))
  H.check('statusline no longer loading', dgemma.statusline() == 'dgemma: shown', dgemma.statusline())
  H.log('first ghost text: %q', g.text)

  -- 2. "Suggest here" (<M-\>) and cycling through its candidates ----------------------------------------------
  H.check('<M-\\> mapped in Insert mode', vim.fn.maparg('<M-\\>', 'i', false, true).buffer == 1)
  api.nvim_feedkeys(vim.keycode('<C-]>'), 'm', false) -- dismiss the automatic one first
  H.check('dismissed', H.wait(5000, function()
    return ghost(buf) == nil
  end) ~= nil)
  api.nvim_feedkeys(vim.keycode('<M-\\>'), 'm', false)
  local first = H.wait(120000, function()
    return ghost(buf)
  end, 100)
  H.check('the trigger key shows a suggestion', first ~= nil)
  api.nvim_feedkeys(vim.keycode('<M-]>'), 'm', false)
  local second = H.wait(5000, function()
    local x = ghost(buf)
    return x and x.hint and x
  end)
  H.check('<M-]> moves to another candidate', second ~= nil and second.hint ~= nil, vim.inspect(second))
  local idx, n = second.hint:match('(%d+)/(%d+)')
  H.log('candidates: %s; first %q, second %q', second.hint, first.text, second.text)
  H.check('several candidates from the explicit trigger', tonumber(n) and tonumber(n) >= 2, second.hint)
  H.check('the second one is selected', tonumber(idx) == 2, second.hint)
  vim.cmd('stopinsert')
  H.wait(3000, function()
    return api.nvim_get_mode().mode == 'n'
  end)

  -- 3. The model's fix from the code action menu on a truncated JSON file ------------------------------------
  local broken = '{\n  "name": "demo",\n  "tags": ["a", "b"],\n  "nested": {"ok": true'
  vim.cmd.edit(vim.fn.fnameescape(H.write_file('cut.json', broken .. '\n')))
  local jbuf = api.nvim_get_current_buf()
  local diags = H.wait(60000, function()
    local d = vim.diagnostic.get(jbuf)
    return #d > 0 and d
  end)
  H.check('structure diagnostics published', diags ~= nil)
  api.nvim_win_set_cursor(0, { diags[1].lnum + 1, diags[1].col })
  local menu, picked = {}, nil
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice) -- the menu `gra` opens; pick the model's fix as a user would
    for i, item in ipairs(items) do
      local title = item.action and item.action.title or tostring(item)
      menu[#menu + 1] = title
      if not picked and title:find('with DiffusionGemma', 1, true) then
        picked = i
      end
    end
    on_choice(picked and items[picked] or nil, picked)
  end
  local before_notes = #notes
  vim.lsp.buf.code_action()
  local fixed = H.wait(120000, function()
    local t = H.buf_text(jbuf)
    return t ~= broken and t
  end)
  vim.ui.select = select
  H.log('menu: %s', table.concat(menu, ' | '))
  H.check('the menu listed the model fix and it was picked', picked ~= nil, vim.inspect(menu))
  H.check('picking it changed the buffer', fixed ~= nil)
  local ok, value = pcall(vim.json.decode, fixed)
  H.check('the deterministic fix was applied: valid JSON', ok, fixed)
  H.check('values kept', value.name == 'demo' and value.tags[2] == 'b' and value.nested.ok == true, vim.inspect(value))
  local reason
  for i = before_notes + 1, #notes do
    if notes[i].msg:find('deterministic fix', 1, true) and notes[i].level >= vim.log.levels.WARN then
      reason = notes[i].msg
    end
  end
  H.check('a visible reason at once', reason ~= nil, vim.inspect(vim.list_slice(notes, before_notes + 1)))
  H.log('reason: %s', reason)

  -- 4. :checkhealth reports the buffer the user came from and the gate in force ------------------------------
  vim.cmd('checkhealth dgemma')
  local report = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  H.log('checkhealth:\n%s', report)
  H.check('checkhealth: the buffer the user came from',
    report:find('cut.json, filetype json): attached, inline completion enabled', 1, true) ~= nil, report)
  H.check('checkhealth: the gate in force is the user setting',
    report:find('suggestion gate in force: min_confidence 0, every suggestion shown (your minConfidence setting)',
      1, true) ~= nil, report)
  H.check('checkhealth: no vim.NIL', not report:find('vim.NIL', 1, true), report)
  H.check('checkhealth: no "root nil"', not report:find('root nil', 1, true), report)
  H.check('checkhealth: no errors', not report:find('ERROR', 1, true), report)
  vim.cmd('tabclose')

  -- 5. A file without a filetype attaches (filetypes = nil: every normal buffer) -----------------------------
  vim.cmd.edit(vim.fn.fnameescape(H.write_file('NOTES', 'plain words here\n')))
  local pbuf = api.nvim_get_current_buf()
  H.check('no filetype', vim.bo[pbuf].filetype == '', vim.bo[pbuf].filetype)
  H.check('attached to a buffer without a filetype', H.wait(20000, function()
    return #dgemma.clients(pbuf) > 0
  end) ~= nil)
  local seen = {}
  for _, c in ipairs(dgemma.clients()) do
    seen[#seen + 1] = ('client %d root %s buffers %s'):format(c.id, tostring(c.root_dir), vim.inspect(vim.tbl_keys(c.attached_buffers)))
  end
  H.check('one client for all buffers', #dgemma.clients() == 1, table.concat(seen, '; ') .. ' ' .. vim.inspect(attaches))

  -- 6. Warnings reached the client, not stderr (Neovim logs every stderr line as [ERROR]) --------------------
  local f = io.open(vim.lsp.log.get_filename(), 'r')
  local lsp_log = f and f:read('*a') or ''
  if f then
    f:close()
  end
  local stderr_lines = {}
  for line in lsp_log:gmatch('[^\n]+') do
    if line:find('"stderr"', 1, true) then
      stderr_lines[#stderr_lines + 1] = line
    end
  end
  H.check('no server stderr in the LSP log', #stderr_lines == 0, table.concat(stderr_lines, '\n'))
  local server_log = ''
  if log_file then
    local lf = io.open(log_file, 'r')
    server_log = lf and lf:read('*a') or ''
    if lf then
      lf:close()
    end
  end
  H.check('the first request was answered while the model loaded',
    server_log:find('inline completion skipped: the model is still loading', 1, true) ~= nil)
end)
