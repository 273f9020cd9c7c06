--- dgemma.next_edit: next-edit suggestions from dgemma-lsp (`dgemma/nextEdit`), shown as virtual text.
---
--- After a pause in editing (or on the request key) the server may answer with edits near the cursor. Each edit's
--- old text is struck through and its new text shown inline (first line) and as virtual lines (the rest). Keys:
--- accept applies every edit of the suggestion and reports it; dismiss hides it and reports that; jump moves the
--- cursor to the suggestion, or, after an accept, to the next site the server named, and asks there.
local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('dgemma.next_edit')

---@class dgemma.NextEditConfig
M.defaults = {
  enabled = true,
  --- Ask automatically this long after the last edit (normal and insert mode); false = only on the request key.
  auto = true,
  delay_ms = 600,
  keys = {
    request = '<M-n>', -- normal/insert: ask for a next edit now
    accept = '<M-y>', -- normal/insert: apply the shown next edit
    dismiss = '<M-e>', -- normal/insert: hide it
    jump = '<M-j>', -- normal: go to the shown edit, or to the next site after an accept
  },
}

--- Per buffer: { result = <dgemma/nextEdit result>, jump = {line, character}?, own_tick = changedtick of our accept }
M.state = {}
--- Counters the tests read (nothing leaves the editor). `behind_ghost`: automatic requests not made, or answers not
--- shown, because ghost text was on screen.
M.stats = { requests = 0, answers = 0, shown = 0, accepted = 0, dismissed = 0, jumps = 0, stale = 0, behind_ghost = 0 }

local function client_for(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = 'dgemma' })[1]
end

local function st(bufnr)
  M.state[bufnr] = M.state[bufnr] or {}
  return M.state[bufnr]
end

--- Remove the shown suggestion's marks (the state's jump target stays).
function M.clear(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
  st(bufnr).result = nil
end

local function byte_col(bufnr, row, character, encoding)
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1]
  if not line then
    return 0
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding or 'utf-16', character, false)
  return ok and col or #line
end

--- Draw a dgemma/nextEdit result: strike the replaced text, show the new text inline / as virtual lines.
function M.render(bufnr, result, encoding)
  api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  for _, e in ipairs(result.edits or {}) do
    local r = e.range
    local sr, er = r.start.line, r['end'].line
    local sc = byte_col(bufnr, sr, r.start.character, encoding)
    local ec = byte_col(bufnr, er, r['end'].character, encoding)
    if sr ~= er or sc ~= ec then
      api.nvim_buf_set_extmark(bufnr, ns, sr, sc, { end_row = er, end_col = ec, hl_group = 'DgemmaNextEditDelete' })
    end
    local lines = vim.split(e.newText or '', '\n', { plain = true })
    if lines[1] ~= '' then
      api.nvim_buf_set_extmark(bufnr, ns, er, ec, {
        virt_text = { { lines[1], 'DgemmaNextEditAdd' } },
        virt_text_pos = 'inline',
      })
    end
    if #lines > 1 then
      local virt = {}
      for i = 2, #lines do
        table.insert(virt, { { lines[i], 'DgemmaNextEditAdd' } })
      end
      api.nvim_buf_set_extmark(bufnr, ns, er, 0, { virt_lines = virt })
    end
  end
end

--- The marks drawn for the shown suggestion (tests read them).
function M.marks(bufnr)
  return api.nvim_buf_get_extmarks(bufnr or 0, ns, 0, -1, { details = true })
end

--- Whether Neovim's inline completion shows ghost text in the buffer. Ghost text goes first: an automatic next
--- edit drawn beside it would put two suggestions on the screen while the user reaches for the accept key.
function M.ghost_shown(bufnr)
  local ghost = api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  return ghost ~= nil and #api.nvim_buf_get_extmarks(bufnr, ghost, 0, -1, { limit = 1 }) > 0
end

--- Ask the server for a next edit at the cursor; `on_done(result)` runs after the answer is handled. `auto`: asked
--- by the pause-after-edit trigger (its answer is not shown over ghost text).
function M.request(bufnr, on_done, auto)
  bufnr = bufnr or api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    return false
  end
  M.stats.requests = M.stats.requests + 1
  local win = vim.fn.bufwinid(bufnr)
  local params = vim.lsp.util.make_position_params(win ~= -1 and win or 0, client.offset_encoding)
  local asked_at = vim.lsp.util.buf_versions[bufnr]
  client:request('dgemma/nextEdit', params, function(err, result)
    if err or not result or not api.nvim_buf_is_valid(bufnr) then
      if on_done then
        on_done(nil)
      end
      return
    end
    M.stats.answers = M.stats.answers + 1
    st(bufnr).last = result
    if vim.lsp.util.buf_versions[bufnr] ~= asked_at then
      M.stats.stale = M.stats.stale + 1 -- typed meanwhile: this answer is for an older text
    elseif auto and result.edits and #result.edits > 0 and M.ghost_shown(bufnr) then
      M.stats.behind_ghost = M.stats.behind_ghost + 1
    elseif result.edits and #result.edits > 0 then
      st(bufnr).result = result
      st(bufnr).encoding = client.offset_encoding
      M.render(bufnr, result, client.offset_encoding)
      M.stats.shown = M.stats.shown + 1
    end
    if on_done then
      on_done(result)
    end
  end, bufnr)
  return true
end

local function run_command(bufnr, command, on_result)
  local client = client_for(bufnr)
  if not client or not command then
    return
  end
  client:request('workspace/executeCommand', { command = command.command, arguments = command.arguments }, function(_, res)
    if on_result then
      on_result(res)
    end
  end, bufnr)
end

--- Apply the shown next edit, report it, and remember where the server says the next one may be.
function M.accept(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  local s = st(bufnr)
  local result = s.result
  if not result then
    return false
  end
  vim.lsp.util.apply_text_edits(result.edits, bufnr, s.encoding or 'utf-16')
  -- TextChanged for this edit fires later, from the main loop: the tick tells it that the edit was ours (an
  -- automatic request for it would race the jump to the site the server names).
  s.own_tick = api.nvim_buf_get_changedtick(bufnr)
  M.clear(bufnr)
  M.stats.accepted = M.stats.accepted + 1
  run_command(bufnr, result.command, function(res)
    s.jump = res and res.jump ~= vim.NIL and res.jump or nil
  end)
  return true
end

function M.dismiss(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  local result = st(bufnr).result
  if not result then
    return false
  end
  M.clear(bufnr)
  M.stats.dismissed = M.stats.dismissed + 1
  run_command(bufnr, result.dismissCommand)
  return true
end

--- Move to the shown edit; without one, to the site the last accept named, and ask for a next edit there.
function M.jump(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  local s = st(bufnr)
  local target
  if s.result and s.result.edits[1] then
    target = s.result.edits[1].range.start
  elseif s.jump then
    target = s.jump
    s.jump = nil
  end
  if not target then
    return false
  end
  local row = target.line
  api.nvim_win_set_cursor(0, { row + 1, byte_col(bufnr, row, target.character, s.encoding) })
  M.stats.jumps = M.stats.jumps + 1
  if not s.result then
    M.request(bufnr)
  end
  return true
end

--- Turn the pause-after-edit trigger on or off for a buffer (the request key keeps working).
function M.set_auto(bufnr, on)
  st(bufnr or api.nvim_get_current_buf()).auto = on and true or false
end

--- Hook called from dgemma's on_attach: keys, highlights and the pause-after-edit trigger for one buffer.
function M.attach(client, bufnr, opts)
  local cfg = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if not cfg.enabled then
    return
  end
  vim.api.nvim_set_hl(0, 'DgemmaNextEditDelete', { default = true, strikethrough = true, link = 'DiffDelete' })
  vim.api.nvim_set_hl(0, 'DgemmaNextEditAdd', { default = true, link = 'DiffAdd' })
  local keys = cfg.keys or {}
  local function map(modes, lhs, fn, desc)
    if lhs and lhs ~= '' then
      vim.keymap.set(modes, lhs, fn, { buffer = bufnr, desc = desc, silent = true })
    end
  end
  map({ 'n', 'i' }, keys.request, function()
    M.request(bufnr)
  end, 'dgemma: ask for a next edit')
  map({ 'n', 'i' }, keys.accept, function()
    M.accept(bufnr)
  end, 'dgemma: accept the next edit')
  map({ 'n', 'i' }, keys.dismiss, function()
    M.dismiss(bufnr)
  end, 'dgemma: dismiss the next edit')
  map('n', keys.jump, function()
    M.jump(bufnr)
  end, 'dgemma: go to the next edit')
  st(bufnr).auto = cfg.auto and true or false
  local group = api.nvim_create_augroup('dgemma.next_edit.' .. bufnr, { clear = true })
  local timer = vim.uv.new_timer()
  api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      if st(bufnr).own_tick == api.nvim_buf_get_changedtick(bufnr) then
        return -- our own accept (M.accept)
      end
      M.clear(bufnr) -- the text moved under it
      if st(bufnr).auto and timer then
        timer:stop()
        timer:start(cfg.delay_ms, 0, vim.schedule_wrap(function()
          if not (api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr and st(bufnr).auto) then
            return
          end
          if M.ghost_shown(bufnr) then
            M.stats.behind_ghost = M.stats.behind_ghost + 1
            return
          end
          M.request(bufnr, nil, true)
        end))
      end
    end,
  })
  api.nvim_create_autocmd('BufWipeout', {
    group = group,
    buffer = bufnr,
    callback = function()
      if timer then
        timer:stop()
        timer:close()
        timer = nil
      end
      M.state[bufnr] = nil
    end,
  })
end

return M
