-- Neovim 0.12 end to end: our plugin attaches to dgemma-lsp, ghost text appears at the cursor in Insert mode,
-- <Tab> (the plugin's mapping) inserts exactly the suggestion, drafts from dgemma/canvas were drawn as virtual text,
-- and a fix-structure code action applied through vim.lsp.buf.code_action leaves valid JSON.
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_nvim012.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')
local api = vim.api

H.run(function()
  H.check('neovim is 0.12+', vim.fn.has('nvim-0.12') == 1, tostring(vim.version()))
  local dgemma = H.load_plugin()
  -- Default next-edit settings: automatic next-edit requests run after each pause, beside the ghost text.
  dgemma.setup({ cmd = H.server_cmd(), settings = { debounceMs = 0 } })

  -- 1. attach ------------------------------------------------------------------------------------------------
  local py = H.write_file('calc.py', 'def add(a, b):\n    """Add two numbers."""\n    return \n')
  vim.cmd.edit(vim.fn.fnameescape(py))
  local buf = api.nvim_get_current_buf()
  H.check('filetype detected', vim.bo[buf].filetype == 'python', vim.bo[buf].filetype)
  local client = H.wait(60000, function()
    local c = dgemma.clients(buf)[1]
    return c and c.initialized and c
  end)
  H.check('plugin attached dgemma-lsp', client ~= nil)
  H.check(
    'server offers inline completion',
    client.server_capabilities.inlineCompletionProvider ~= nil,
    vim.inspect(client.server_capabilities.inlineCompletionProvider)
  )
  H.check('inline completion enabled', vim.lsp.inline_completion.is_enabled({ bufnr = buf }))
  H.check('<Tab> mapped in Insert mode', vim.fn.maparg('<Tab>', 'i', false, true).buffer == 1)
  local ne = require('dgemma.next_edit')
  H.check('automatic next edits on (the default)', ne.state[buf] and ne.state[buf].auto == true)

  -- 2. ghost text in Insert mode ---------------------------------------------------------------------------------
  api.nvim_win_set_cursor(0, { 3, 0 })
  vim.cmd('startinsert!') -- append at the end of "    return "
  H.check('in insert mode', H.wait(5000, function()
    return api.nvim_get_mode().mode == 'i'
  end) ~= nil)
  local cursor = api.nvim_win_get_cursor(0)
  H.check('cursor after "return "', cursor[1] == 3 and cursor[2] == #'    return ', vim.inspect(cursor))
  local before = H.buf_text(buf)
  local ns = api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  local last_poke = vim.uv.now()
  local ghost = H.wait(150000, function()
    if not ns then
      ns = api.nvim_get_namespaces()['nvim.lsp.inline_completion']
      return nil
    end
    for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
      local d = m[4]
      local parts = {}
      for _, chunk in ipairs(d.virt_text or {}) do
        parts[#parts + 1] = chunk[1]
      end
      local lines = { table.concat(parts) }
      for _, vl in ipairs(d.virt_lines or {}) do
        local l = {}
        for _, chunk in ipairs(vl) do
          l[#l + 1] = chunk[1]
        end
        lines[#lines + 1] = table.concat(l)
      end
      local text = table.concat(lines, '\n')
      if text:match('%S') then
        return { row = m[2], col = m[3], text = text }
      end
    end
  end, 100, function()
    -- The model loads in the background; an empty early answer is not retried by Neovim until the cursor
    -- moves, so nudge the automatic trigger every few seconds as a user's typing would.
    if vim.uv.now() - last_poke > 4000 then
      last_poke = vim.uv.now()
      api.nvim_exec_autocmds('CursorMovedI', { buffer = buf })
    end
  end)
  H.check('ghost text appears', ghost ~= nil)
  -- with ghost text on screen an automatic next edit is neither asked for nor drawn (lua/dgemma/next_edit.lua)
  H.check('next edits see the ghost text', ne.ghost_shown(buf))
  H.check(
    'ghost text at the cursor',
    ghost.row == cursor[1] - 1 and ghost.col == cursor[2],
    ('extmark %d:%d, cursor %d:%d'):format(ghost.row, ghost.col, cursor[1] - 1, cursor[2])
  )
  H.log('ghost text: %q', ghost.text)
  H.check('dgemma/canvas notifications arrived', dgemma.stats.canvas_notifications > 0, dgemma.stats.canvas_notifications)
  H.check('canvas drafts drawn as virtual text', dgemma.stats.canvas_rendered > 0, dgemma.stats.canvas_rendered)
  H.check('draft cleared once the result is shown', dgemma.canvas_text(buf) == '', dgemma.canvas_text(buf))

  -- 3. <M-Right> accepts the next word only ---------------------------------------------------------------------------
  local word = dgemma.next_chunk(ghost.text, 'word')
  local full_text = ghost.text
  api.nvim_feedkeys(vim.keycode('<M-Right>'), 'm', false)
  local partial = H.wait(10000, function()
    local t = H.buf_text(buf)
    return t ~= before and t
  end)
  H.check('<M-Right> inserted the next word', partial ~= nil)
  local want_partial = before:gsub('    return \n?$', '') -- lines 1-2 and the newline before line 3
  local line3 = api.nvim_buf_get_lines(buf, 2, 3, false)[1]
  H.check('exactly the next word of the suggestion', line3 == '    return ' .. word, vim.inspect({ line3, word }))
  H.check('the rest of the buffer untouched', vim.startswith(partial, want_partial), vim.inspect(partial))
  -- The cursor moved, so Neovim asks again (the server answers from what is already typed) and shows the rest.
  before = H.buf_text(buf)
  cursor = api.nvim_win_get_cursor(0)
  H.check('cursor after the accepted word', cursor[2] == #('    return ' .. word), vim.inspect(cursor))
  -- A <Tab> that beats the refresh gets the item from before the word: only its rest goes in, at the cursor.
  local stale = {
    insert_text = full_text,
    range = vim.range.extmark(buf, cursor[1] - 1, #'    return ', cursor[1] - 1, #'    return '),
  }
  local rebased = dgemma.rebase_item(stale, buf)
  local r_row, r_col, r_erow, r_ecol = rebased.range:to_extmark()
  H.check('a stale item is rebased to the rest of its text at the cursor',
    rebased.insert_text == full_text:sub(#word + 1) and r_row == cursor[1] - 1 and r_col == cursor[2]
      and r_erow == r_row and r_ecol == cursor[2],
    vim.inspect({ rebased.insert_text, r_row, r_col, r_erow, r_ecol }))
  last_poke = vim.uv.now()
  ghost = H.wait(60000, function()
    for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
      local d = m[4]
      local parts = {}
      for _, chunk in ipairs(d.virt_text or {}) do
        parts[#parts + 1] = chunk[1]
      end
      local lines = { table.concat(parts) }
      for _, vl in ipairs(d.virt_lines or {}) do
        local l = {}
        for _, chunk in ipairs(vl) do
          l[#l + 1] = chunk[1]
        end
        lines[#lines + 1] = table.concat(l)
      end
      local text = table.concat(lines, '\n')
      if text:match('%S') and m[2] == cursor[1] - 1 and m[3] == cursor[2] then
        return { row = m[2], col = m[3], text = text }
      end
    end
  end, 100, function()
    if vim.uv.now() - last_poke > 4000 then
      last_poke = vim.uv.now()
      api.nvim_exec_autocmds('CursorMovedI', { buffer = buf })
    end
  end)
  H.check('ghost text shown again after a partial accept', ghost ~= nil)
  H.log('ghost text after the word: %q', ghost.text)
  H.check('typing through: the rest of the same suggestion', ghost.text == full_text:sub(#word + 1), ghost.text)

  -- 4. <Tab> accepts exactly the shown text -------------------------------------------------------------------------
  api.nvim_feedkeys(vim.keycode('<Tab>'), 'm', false)
  local after = H.wait(10000, function()
    local t = H.buf_text(buf)
    return t ~= before and t
  end)
  H.check('<Tab> changed the buffer', after ~= nil)
  local lines_before = vim.split(before, '\n', { plain = true })
  local row = cursor[1]
  local line_prefix = lines_before[row]:sub(1, cursor[2])
  local line_suffix = lines_before[row]:sub(cursor[2] + 1)
  local expected = table.concat(vim.list_slice(lines_before, 1, row - 1), '\n')
    .. (row > 1 and '\n' or '')
    .. line_prefix
    .. ghost.text
    .. line_suffix
    .. (row < #lines_before and ('\n' .. table.concat(vim.list_slice(lines_before, row + 1), '\n')) or '')
  H.check('accepting inserted exactly the ghost text', after == expected, vim.inspect({ got = after, want = expected }))
  local ghost_lines = vim.split(ghost.text, '\n', { plain = true })
  local c2 = api.nvim_win_get_cursor(0)
  H.check(
    'cursor at the end of the inserted text',
    c2[1] == row + #ghost_lines - 1
      and c2[2] == (#ghost_lines == 1 and cursor[2] or 0) + #ghost_lines[#ghost_lines],
    vim.inspect(c2)
  )
  vim.cmd('stopinsert')
  H.wait(3000, function()
    return api.nvim_get_mode().mode == 'n'
  end)

  -- 5. fix structure through Neovim's code action ----------------------------------------------------------------
  local broken = '{\n  "name": "demo",\n  "tags": ["a", "b",],\n  "nested": {"ok": true\n}\n'
  local json = H.write_file('broken.json', broken)
  vim.cmd.edit(vim.fn.fnameescape(json))
  local jbuf = api.nvim_get_current_buf()
  H.check('json filetype', vim.bo[jbuf].filetype == 'json', vim.bo[jbuf].filetype)
  H.check('attached to the JSON buffer', H.wait(30000, function()
    return dgemma.clients(jbuf)[1] ~= nil
  end) ~= nil)
  local diags = H.wait(30000, function()
    local d = vim.diagnostic.get(jbuf)
    return #d > 0 and d
  end)
  H.check('structure diagnostics published', diags ~= nil)
  H.log('diagnostic: %s', diags[1].message)
  api.nvim_win_set_cursor(0, { diags[1].lnum + 1, diags[1].col })
  dgemma.fix_structure() -- "Fix all structure problems": vim.lsp.buf.code_action + codeAction/resolve + apply
  local fixed = H.wait(120000, function()
    local t = H.buf_text(jbuf)
    return t ~= broken:gsub('\n$', '') and t
  end)
  H.check('code action edited the buffer', fixed ~= nil)
  H.log('fixed: %q', fixed)
  local ok, value = pcall(vim.json.decode, fixed)
  H.check('buffer is valid JSON after the fix', ok, not ok and value or nil)
  H.check(
    'values outside the broken spans kept',
    value.name == 'demo' and value.tags[1] == 'a' and value.tags[2] == 'b' and value.nested.ok == true,
    vim.inspect(value)
  )
  H.wait(20000, function()
    return #vim.diagnostic.get(jbuf) == 0
  end)
  H.check('diagnostics cleared after the fix', #vim.diagnostic.get(jbuf) == 0, #vim.diagnostic.get(jbuf))

  -- 6. :checkhealth dgemma on 0.12 -----------------------------------------------------------------------------------
  vim.cmd('checkhealth dgemma')
  local report = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  H.check('checkhealth: ghost text available', report:find('inline completion (ghost text) available', 1, true) ~= nil)
  H.check('checkhealth: server answers', report:find('server answers dgemma.status', 1, true) ~= nil)
  local ready = report:find('backend.state: ready', 1, true) ~= nil and report:find('device: cpu', 1, true) ~= nil
  H.check('checkhealth: backend ready on cpu', ready, not ready and report or nil)
  local clean = not report:find('ERROR', 1, true)
  H.check('checkhealth: no errors', clean, not clean and report or nil)

  -- 7. the statusline says when the server withheld a suggestion (its final dgemma/canvas outcome) ----------------
  local lsp_status = vim.lsp.status
  vim.lsp.status = function() -- no progress text in the way (a model load would show first)
    return ''
  end
  local final = { uri = vim.uri_from_bufnr(buf), final = true, candidate = 0, text = '', outcome = 'withheld' }
  dgemma.on_canvas(nil, final, {})
  H.check('statusline says withheld', dgemma.statusline() == 'dgemma: withheld', dgemma.statusline())
  final.outcome = 'completed'
  dgemma.on_canvas(nil, final, {})
  H.check('statusline back after a shown one', dgemma.statusline() == 'dgemma', dgemma.statusline())
  vim.lsp.status = lsp_status
end)
