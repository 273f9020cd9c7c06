--- dgemma.nvim: Neovim client for dgemma-lsp (DiffusionGemma inline completions and "fix structure" actions).
---
--- require('dgemma').setup({ ... }) starts `dgemma-lsp --stdio` through vim.lsp.config/vim.lsp.enable (0.11+) or a
--- FileType autocmd with vim.lsp.start (0.10), enables vim.lsp.inline_completion on 0.12+, maps accept keys, and
--- renders the server's `dgemma/canvas` drafts as virtual text while a suggestion denoises.
local M = {}

local api = vim.api

M.name = 'dgemma'

---@class dgemma.Keys
---@field accept? string|false       Insert mode: accept the whole suggestion (falls back to the key itself)
---@field accept_word? string|false  Insert mode: accept the next word
---@field accept_line? string|false  Insert mode: accept the next line
---@field next? string|false         Insert mode: next candidate
---@field prev? string|false         Insert mode: previous candidate
---@field dismiss? string|false      Insert mode: hide the suggestion
---@field fix? string|false          Normal mode: fix structure at the cursor / in the document
---@field trigger? string|false      Insert mode: suggest here (an explicit request: up to 3 candidates to cycle)

---@class dgemma.Config
M.defaults = {
  --- Full server command; nil = built from `server_path` / `python` + `args`, where `server_path` is looked up on
  --- PATH and then in this plugin's own repository (`<repo>/.venv/bin/dgemma-lsp`, what scripts/setup installs).
  cmd = nil, ---@type string[]?
  server_path = 'dgemma-lsp',
  --- A Python interpreter with dgemma-lsp installed (e.g. a venv's bin/python); wins over server_path.
  python = nil, ---@type string?
  args = {}, ---@type string[]
  --- Filetypes to attach to; nil = every normal buffer (those without a filetype included).
  filetypes = nil, ---@type string[]?
  root_markers = { '.git', 'pyproject.toml', 'package.json', 'Cargo.toml', 'go.mod' },
  --- Server settings (the README's settings table; snake_case or camelCase keys).
  settings = {},
  --- Use vim.lsp.inline_completion (needs Neovim 0.12+).
  inline_completion = true,
  --- Render dgemma/canvas drafts as virtual text while a suggestion denoises.
  canvas = true,
  keys = {
    accept = '<Tab>',
    accept_word = '<M-Right>',
    accept_line = '<M-C-Right>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    trigger = '<M-\\>',
    fix = false,
  },
  --- Tell users of Neovim < 0.12 once that ghost text needs 0.12.
  notify_fallback = true,
  --- Next-edit suggestions (lua/dgemma/next_edit.lua: defaults, keys); false = off.
  next_edit = {},
}

M.config = nil ---@type dgemma.Config?
--- Counters the tests and :checkhealth read (nothing leaves the editor).
M.stats = { canvas_notifications = 0, canvas_rendered = 0, attached = 0 }

local canvas_ns = api.nvim_create_namespace('dgemma.canvas')
local fallback_notified = false

--- Whether this Neovim has LSP inline completion (0.12+).
function M.has_inline_completion()
  return vim.lsp.inline_completion ~= nil and vim.fn.has('nvim-0.12') == 1
end

--- The message users of older Neovim versions see once.
function M.fallback_message()
  local v = vim.version()
  return ('dgemma: ghost text (inline completion) needs Neovim 0.12+; this is %d.%d.%d. '
    .. 'Fix-structure code actions and diagnostics still work.'):format(v.major, v.minor, v.patch)
end

--- The repository this plugin lives in (editors/nvim/lua/dgemma/init.lua -> four folders up).
function M.repo_dir()
  local src = debug.getinfo(1, 'S').source:sub(2)
  src = vim.uv.fs_realpath(src) or src -- a native package is often a symlink into the repository
  return vim.fs.normalize(vim.fn.fnamemodify(src, ':p:h:h:h:h:h'))
end

--- The server executable: `server_path` when it is executable (PATH or a path), else the plugin repository's
--- `.venv/bin/dgemma-lsp`; nil when neither exists.
---@param cfg dgemma.Config
---@return string?, string[] tried
function M.find_server(cfg)
  local name = cfg.server_path or 'dgemma-lsp'
  local venv = M.repo_dir() .. '/.venv/bin/dgemma-lsp'
  local tried = { name, venv }
  if vim.fn.executable(name) == 1 then
    return name, tried
  end
  if vim.fn.executable(venv) == 1 then
    return venv, tried
  end
  return nil, tried
end

--- The command that starts the server, and when it cannot be started, why and what to do.
---@param cfg dgemma.Config
---@return string[] cmd, string? problem
function M.server_cmd(cfg)
  local cmd, problem
  if cfg.cmd and #cfg.cmd > 0 then
    cmd = vim.deepcopy(cfg.cmd)
    if vim.fn.executable(cmd[1]) == 0 then
      problem = ('the server command %q (setup{ cmd = ... }) is not executable'):format(cmd[1])
    end
  elseif cfg.python and cfg.python ~= '' then
    cmd = { cfg.python, '-m', 'dgemma_lsp.cli', '--stdio' }
    if vim.fn.executable(cfg.python) == 0 then
      problem = ('the Python %q (setup{ python = ... }) is not executable'):format(cfg.python)
    end
  else
    local exe, tried = M.find_server(cfg)
    cmd = { exe or tried[1], '--stdio' }
    if not exe then
      problem = ('dgemma-lsp not found: %q is not on PATH and %s does not exist'):format(tried[1], tried[2])
    end
  end
  return vim.list_extend(cmd, cfg.args or {}), problem
end

--- The one message a user sees when the server cannot start.
---@param problem string
function M.missing_server_message(problem)
  return ('dgemma: cannot start the language server: %s. Install it with `bash scripts/setup` in the dgemma-lsp '
    .. "repository (it creates .venv/bin/dgemma-lsp, found automatically), or point the plugin at it: "
    .. "require('dgemma').setup({ cmd = { '/path/to/.venv/bin/dgemma-lsp', '--stdio' } }). "
    .. ':checkhealth dgemma shows what was tried.'):format(problem)
end

--- All running dgemma clients (optionally for one buffer).
---@param bufnr? integer
---@return vim.lsp.Client[]
function M.clients(bufnr)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ name = M.name, bufnr = bufnr })
end

-- ---------------------------------------------------------------------------------------------------------------
-- Position helpers

---@param bufnr integer
---@param row integer 0-based
---@param character integer LSP character offset
---@param encoding string
---@return integer 0-based byte column
local function byte_col(bufnr, row, character, encoding)
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  if encoding == 'utf-8' then
    return math.min(character, #line)
  end
  -- 0.11+ signature first, then 0.10's (str, index, use_utf16).
  local ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  if not ok then
    ok, col = pcall(vim.str_byteindex, line, character, encoding == 'utf-16')
  end
  return ok and math.min(col, #line) or #line
end

-- ---------------------------------------------------------------------------------------------------------------
-- dgemma/canvas: refining drafts as virtual text

--- Per buffer: the request being previewed and how far its canvases got. Each notification's `text` is already
--- the whole cleaned suggestion so far (committed canvases + current draft); late drafts of a committed canvas
--- are dropped so the preview only moves forward.
---@type table<integer, {id: any, committed: integer, index: integer, step: integer}>
local previews = {}

local function clear_canvas(bufnr)
  previews[bufnr] = nil
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, canvas_ns, 0, -1)
  end
end
M.clear_canvas = clear_canvas

M.outcomes = {} ---@type table<string, table<string, table>> uri -> feature -> the server's `dgemma/outcome`

--- Handler for the server's `dgemma/canvas` notification.
function M.on_canvas(_, params, ctx)
  M.stats.canvas_notifications = M.stats.canvas_notifications + 1
  local cfg = M.config or M.defaults
  if type(params) == 'table' and params.final and (params.candidate or 0) == 0 then
    -- for the statusline: a withheld suggestion (under min_confidence) explains why no ghost text appeared
    M.last_outcome = params.outcome
    if params.outcome == 'withheld' and type(params.uri) == 'string' then
      local sec, usec = vim.uv.gettimeofday()
      M.outcomes[params.uri] = M.outcomes[params.uri] or {}
      M.outcomes[params.uri].inlineCompletion = { feature = 'inlineCompletion', state = 'withheld', at = sec + usec / 1e6 }
    end
  end
  if not cfg.canvas or type(params) ~= 'table' or type(params.uri) ~= 'string' then
    return
  end
  if (params.candidate or 0) ~= 0 then
    return -- extra candidates of an invoked request: only the first is previewed
  end
  local bufnr = vim.uri_to_bufnr(params.uri)
  if not api.nvim_buf_is_loaded(bufnr) then
    return
  end
  if params.final then
    -- The inline completion result that follows is rendered by vim.lsp.inline_completion itself.
    clear_canvas(bufnr)
    return
  end
  -- Drafts for an older document version are stale: the user kept typing.
  local version = vim.lsp.util.buf_versions[bufnr]
  if version and params.version and params.version ~= version then
    return
  end
  local st = previews[bufnr]
  if not st or st.id ~= params.requestId then
    st = { id = params.requestId, committed = 0, index = 0, step = -1 }
    previews[bufnr] = st
  end
  local idx = params.canvasIndex or 0
  if params.kind == 'committed' then
    st.committed, st.index, st.step = math.max(st.committed, idx + 1), idx + 1, -1
  elseif idx >= st.committed and (idx > st.index or (idx == st.index and (params.step or 0) >= st.step)) then
    st.index, st.step = idx, params.step or 0
  else
    return
  end
  M.render_canvas(bufnr, params.position, params.text or '', ctx and ctx.client_id)
end

--- Draw `text` as ghost-like virtual text at an LSP position (only while typing there).
function M.render_canvas(bufnr, position, text, client_id)
  api.nvim_buf_clear_namespace(bufnr, canvas_ns, 0, -1)
  if not text or text == '' or type(position) ~= 'table' then
    return
  end
  if not vim.startswith(api.nvim_get_mode().mode, 'i') or api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local client = client_id and vim.lsp.get_client_by_id(client_id)
  local encoding = client and client.offset_encoding or 'utf-16'
  local row = position.line
  if row >= api.nvim_buf_line_count(bufnr) then
    return
  end
  local col = byte_col(bufnr, row, position.character, encoding)
  local cursor = api.nvim_win_get_cursor(0)
  if cursor[1] - 1 ~= row or cursor[2] ~= col then
    return -- the cursor moved away: a draft there would only distract
  end
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'DgemmaDraft' } }
  end
  local ok = pcall(api.nvim_buf_set_extmark, bufnr, canvas_ns, row, col, {
    virt_text = { { lines[1], 'DgemmaDraft' } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
  if ok then
    M.stats.canvas_rendered = M.stats.canvas_rendered + 1
  end
end

--- The draft text currently drawn in a buffer ('' if none), for tests and statuslines.
function M.canvas_text(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local marks = api.nvim_buf_get_extmarks(bufnr, canvas_ns, 0, -1, { details = true })
  local out = {}
  for _, m in ipairs(marks) do
    for _, chunk in ipairs(m[4].virt_text or {}) do
      out[#out + 1] = chunk[1]
    end
  end
  return table.concat(out)
end

-- ---------------------------------------------------------------------------------------------------------------
-- Accepting suggestions

--- The next word (leading whitespace, then a word or a run of punctuation) or line of `rest`.
---@param rest string
---@param unit 'word'|'line'
---@return string
function M.next_chunk(rest, unit)
  if rest == '' then
    return ''
  end
  if unit == 'line' then
    local chunk = rest:match('^[^\n]*\n?') or rest
    if chunk == '\n' then
      chunk = rest:match('^\n[^\n]*') or chunk
    end
    return chunk
  end
  return rest:match('^%s*[%w_]+') or rest:match('^%s*[^%w_%s]+') or rest:match('^%s+') or rest
end

--- The item <Tab> accepts, brought up to date: an item that came before what was typed or partly accepted since
--- (its refresh not back yet) starts before the cursor, and the text it covers there is already in the buffer. Only
--- the rest goes in, over the text its range covered after the old cursor, which moved right by as much.
---@param item vim.lsp.inline_completion.Item
---@param bufnr integer
---@return vim.lsp.inline_completion.Item
function M.rebase_item(item, bufnr)
  local text = item.insert_text
  if type(text) ~= 'string' or not item.range then
    return item
  end
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local srow, scol, erow, ecol = item.range:to_extmark()
  if srow ~= row or erow ~= row or scol >= col then
    return item -- our server's items start at the cursor they were asked for: this one is current
  end
  local typed = api.nvim_buf_get_text(bufnr, row, scol, row, col, {})[1] or ''
  if not vim.startswith(text, typed) then
    return item
  end
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local stop = math.min(#line, math.max(col, ecol + #typed))
  return vim.tbl_extend('force', item, {
    insert_text = text:sub(#typed + 1),
    range = vim.range.extmark(bufnr, row, col, row, stop),
  })
end

--- Accept part of the shown suggestion: insert it at the cursor ourselves (so a suffix the full item would
--- replace stays), then the cursor move asks the server again, whose typing-through answers with the remainder.
---@param unit 'word'|'line'
---@return boolean accepted
function M.accept_partial(unit)
  if not M.has_inline_completion() then
    return false
  end
  local bufnr = api.nvim_get_current_buf()
  return vim.lsp.inline_completion.get({
    bufnr = bufnr,
    on_accept = function(item)
      local text = type(item.insert_text) == 'string' and item.insert_text or item.insert_text.value
      local cursor = api.nvim_win_get_cursor(0)
      local row, col = cursor[1] - 1, cursor[2]
      -- Text the item covers before the cursor (its range may start earlier) is already in the buffer.
      if item.range then
        local srow, scol = item.range:to_extmark()
        if srow == row and scol <= col then
          local typed = api.nvim_buf_get_text(bufnr, row, scol, row, col, {})[1] or ''
          if vim.startswith(text, typed) then
            text = text:sub(#typed + 1)
          end
        end
      end
      local chunk = M.next_chunk(text, unit)
      if chunk == '' then
        return nil
      end
      local lines = vim.split(chunk, '\n', { plain = true })
      api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
      local last = lines[#lines]
      api.nvim_win_set_cursor(0, { row + #lines, (#lines == 1 and col or 0) + #last })
      return nil
    end,
  })
end

-- ---------------------------------------------------------------------------------------------------------------
-- Explicit requests and the model load

--- Model-load progress from the server's `$/progress` (tokens `dgemma-load-*`, title "DiffusionGemma").
---@type {loading: boolean, message?: string, percentage?: integer}
M.progress = { loading = false }
--- Buffers whose explicit trigger arrived while the model loaded: asked again (Invoked) once it is ready.
local pending_invoked = {} ---@type table<integer, boolean>

--- Neovim's own inline completion state for a buffer (0.12's capability object), if it exposes one.
local function completor(bufnr)
  local ok, cap = pcall(require, 'vim.lsp._capability')
  local c = ok and type(cap.all) == 'table' and cap.all.inline_completion
  return c and c.active and c.active[bufnr] or nil
end

--- Ask for a suggestion at the cursor now: `invoked` = an explicit request (the server offers up to 3 candidates to
--- cycle with keys.next / keys.prev), else an automatic one, as typing would. Shown by vim.lsp.inline_completion.
---@param bufnr? integer
---@param invoked? boolean
---@return boolean requested
function M.request_inline(bufnr, invoked)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not M.has_inline_completion() or #M.clients(bufnr) == 0 then
    return false
  end
  local c = completor(bufnr)
  if c and type(c.request) == 'function' then
    c:request(invoked and vim.lsp.protocol.InlineCompletionTriggerKind.Invoked
      or vim.lsp.protocol.InlineCompletionTriggerKind.Automatic)
    return true
  end
  -- No capability object to ask: the automatic trigger still runs on CursorMovedI.
  api.nvim_exec_autocmds('CursorMovedI', { buffer = bufnr, modeline = false })
  return true
end

--- "Suggest here" (keys.trigger): an explicit request at the cursor.
function M.trigger(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if M.progress.loading then
    pending_invoked[bufnr] = true -- asked again once the model is ready
  end
  return M.request_inline(bufnr, true)
end

--- `LspProgress` from our server: track the model load for the statusline; when it ends, ask again at the cursor
--- (the requests made meanwhile were answered empty, and Neovim only asks again when the cursor moves).
local function on_progress(ev)
  local data = ev.data or {}
  local client = data.client_id and vim.lsp.get_client_by_id(data.client_id)
  local params = data.params or {}
  local value = params.value
  if not client or client.name ~= M.name or type(value) ~= 'table' then
    return
  end
  if type(params.token) == 'string' and not vim.startswith(params.token, 'dgemma-load') then
    return
  end
  if value.kind == 'begin' or value.kind == 'report' then
    M.progress = {
      loading = true,
      message = value.message or M.progress.message,
      percentage = value.percentage or M.progress.percentage,
    }
    return
  end
  if value.kind ~= 'end' then
    return
  end
  M.progress = { loading = false, message = value.message }
  local bufnr = api.nvim_get_current_buf()
  local invoked = pending_invoked[bufnr] or false
  pending_invoked = {}
  if type(value.message) == 'string' and not vim.startswith(value.message, 'ready') then
    return -- failed or superseded: nothing new to ask for (the server said why)
  end
  if vim.startswith(api.nvim_get_mode().mode, 'i') and M.has_inline_completion()
    and vim.lsp.inline_completion.is_enabled({ bufnr = bufnr }) then
    M.request_inline(bufnr, invoked)
  end
end

local function map_keys(bufnr, keys)
  local function imap(lhs, rhs, desc, expr)
    if lhs and lhs ~= '' then
      vim.keymap.set('i', lhs, rhs, { buffer = bufnr, expr = expr, desc = desc, silent = true })
    end
  end
  if M.has_inline_completion() then
    imap(keys.accept, function()
      local function current(item)
        return M.rebase_item(item, bufnr)
      end
      if not vim.lsp.inline_completion.get({ bufnr = bufnr, on_accept = current }) then
        -- Nothing shown: the key keeps its usual meaning.
        return vim.api.nvim_replace_termcodes(keys.accept, true, true, true)
      end
      return ''
    end, 'dgemma: accept suggestion', true)
    imap(keys.accept_word, function()
      M.accept_partial('word')
    end, 'dgemma: accept next word')
    imap(keys.accept_line, function()
      M.accept_partial('line')
    end, 'dgemma: accept next line')
    imap(keys.next, function()
      vim.lsp.inline_completion.select({ count = 1 })
    end, 'dgemma: next suggestion')
    imap(keys.prev, function()
      vim.lsp.inline_completion.select({ count = -1 })
    end, 'dgemma: previous suggestion')
    imap(keys.dismiss, function()
      M.dismiss(bufnr)
    end, 'dgemma: dismiss suggestion')
    imap(keys.trigger, function()
      M.trigger(bufnr)
    end, 'dgemma: suggest here (up to 3 candidates)')
  end
  if keys.fix and keys.fix ~= '' then
    vim.keymap.set('n', keys.fix, function()
      M.fix_structure()
    end, { buffer = bufnr, desc = 'dgemma: fix structure' })
  end
end

--- Hide the current suggestion and any draft.
function M.dismiss(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  clear_canvas(bufnr)
  if M.has_inline_completion() then
    -- Toggling off and on drops the shown item and pending requests for this buffer only.
    vim.lsp.inline_completion.enable(false, { bufnr = bufnr })
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
  end
end

-- ---------------------------------------------------------------------------------------------------------------
-- Code actions and commands

--- Code action kinds the server uses (see docs/server.md).
M.kinds = {
  fix = 'quickfix.dgemma.fixStructure', -- one issue, model (validated)
  fix_rules = 'quickfix.dgemma.fixStructure.rules', -- one issue, deterministic
  fix_all = 'source.fixAll.dgemma', -- every issue; model first, deterministic fallback
  table = 'refactor.rewrite.dgemma.completeTable',
  rewrite = 'refactor.rewrite.dgemma.rewriteSelection',
}

--- Is this code action one of the server's structure fixes?
function M.is_fix_action(action)
  local kind = type(action) == 'table' and action.kind or ''
  return type(kind) == 'string' and (vim.startswith(kind, M.kinds.fix) or kind == M.kinds.fix_all)
end

local function dgemma_filter(pred)
  return function(action, client_id)
    local client = client_id and vim.lsp.get_client_by_id(client_id)
    if client and client.name ~= M.name then
      return false
    end
    return pred(action)
  end
end

--- Apply a structure fix through Neovim's own code action machinery (codeAction/resolve included).
--- Default: the "fix all structure problems" action, which tries the model and falls back to the deterministic
--- repair, so it always applies a validated edit when one exists. `{ kind = M.kinds.fix }` picks the per-issue
--- model fix at the cursor instead (`{ kind = M.kinds.fix_rules }` the deterministic one); `{ apply = false }`
--- shows the menu.
---@param opts? {apply?: boolean, kind?: string, filter?: fun(action: table): boolean, range?: table}
function M.fix_structure(opts)
  opts = opts or {}
  local kind = opts.kind or M.kinds.fix_all
  local pred = opts.filter or function(action)
    return action.kind == kind
  end
  if opts.apply == false then
    pred = opts.filter or M.is_fix_action
  end
  local range = opts.range
  if not range and kind == M.kinds.fix_all then
    -- The whole document, so "fix all" is listed wherever the cursor is.
    local n = api.nvim_buf_line_count(0)
    range = { start = { 1, 0 }, ['end'] = { n, math.max(#(api.nvim_buf_get_lines(0, n - 1, n, false)[1] or '') - 1, 0) } }
  end
  vim.lsp.buf.code_action({
    apply = opts.apply ~= false,
    range = range,
    context = { only = opts.apply ~= false and { kind } or nil },
    filter = dgemma_filter(pred),
  })
end

--- Ask the model to rewrite the given lines (the server's "Rewrite selection" code action; validated for JSON and
--- Markdown, applied through vim.lsp.buf.code_action).
---@param line1 integer 1-based
---@param line2 integer 1-based
function M.rewrite(line1, line2)
  local last = api.nvim_buf_get_lines(0, line2 - 1, line2, false)[1] or ''
  vim.lsp.buf.code_action({
    range = { start = { line1, 0 }, ['end'] = { line2, math.max(#last - 1, 0) } },
    apply = true,
    context = { only = { M.kinds.rewrite } },
    filter = dgemma_filter(function(action)
      return action.kind == M.kinds.rewrite
    end),
  })
end

--- Run a server command synchronously; returns its result (or nil and an error string).
---@param command string
---@param arguments table
---@param timeout_ms? integer
local function execute_sync(command, arguments, timeout_ms)
  local client = M.clients()[1]
  if not client then
    return nil, 'no dgemma-lsp client is running'
  end
  local params = { command = command, arguments = arguments }
  local resp, err
  if client.request_sync and vim.fn.has('nvim-0.11') == 1 then
    resp, err = client:request_sync('workspace/executeCommand', params, timeout_ms or 5000)
  else
    resp, err = client.request_sync('workspace/executeCommand', params, timeout_ms or 5000)
  end
  if not resp then
    return nil, err or 'no answer'
  end
  if resp.err then
    return nil, resp.err.message or vim.inspect(resp.err)
  end
  return resp.result
end

--- Run `dgemma.status` on the server; returns the result table (or nil and an error string).
---@param timeout_ms? integer
function M.status(timeout_ms)
  return execute_sync('dgemma.status', {}, timeout_ms)
end

-- ---------------------------------------------------------------------------------------------------------------
-- Why nothing is shown: the server's `dgemma/outcome` (the last request's end per document and feature)

--- Handler for the server's `dgemma/outcome` notification.
function M.on_outcome(_, params)
  if type(params) ~= 'table' or type(params.uri) ~= 'string' or type(params.feature) ~= 'string' then
    return
  end
  M.outcomes[params.uri] = M.outcomes[params.uri] or {}
  M.outcomes[params.uri][params.feature] = params
  vim.schedule(function()
    pcall(vim.cmd.redrawstatus)
  end)
end

--- The newest outcome of a buffer (either feature), or nil.
---@param bufnr? integer
function M.outcome(bufnr)
  local by = M.outcomes[vim.uri_from_bufnr(bufnr or api.nvim_get_current_buf())]
  local last
  for _, o in pairs(by or {}) do
    if not last or (o.at or 0) > (last.at or 0) then
      last = o
    end
  end
  return last
end

--- One short line for an outcome: "withheld 0.12 < 0.25", "disabled", "shown" ...
function M.outcome_text(o)
  if not o then
    return nil
  end
  if o.state == 'withheld' and type(o.confidence) == 'number' and type(o.gate) == 'number' then
    return ('withheld %.2f < %.2f'):format(o.confidence, o.gate)
  end
  return o.state
end

--- For a statusline: "dgemma: loading 40%" while the model loads, then the current buffer's last outcome
--- ("dgemma: withheld 0.12 < 0.25", "dgemma: shown", "dgemma: disabled", "dgemma: timeout" ...), else "dgemma".
function M.statusline()
  local clients = M.clients()
  if #clients == 0 then
    return ''
  end
  if M.progress.loading then
    return 'dgemma: loading' .. (M.progress.percentage and (' %d%%'):format(M.progress.percentage) or '')
  end
  local text = M.outcome_text(M.outcome())
  if text then
    return 'dgemma: ' .. text
  end
  if M.last_outcome == 'withheld' then
    return 'dgemma: withheld'
  end
  return 'dgemma'
end

--- `dgemma.explain` for a buffer: what its last requests sent (sizes) and what came back, as lines.
---@param bufnr? integer
function M.explain(bufnr)
  local uri = vim.uri_from_bufnr(bufnr or api.nvim_get_current_buf())
  return execute_sync('dgemma.explain', { { uri = uri } })
end

-- ---------------------------------------------------------------------------------------------------------------
-- Attaching

local function on_attach(client, bufnr)
  if client.name ~= M.name then
    return
  end
  local cfg = M.config or M.defaults
  M.stats.attached = M.stats.attached + 1
  if M.has_inline_completion() then
    if cfg.inline_completion then
      vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
    end
  elseif cfg.notify_fallback and not fallback_notified then
    fallback_notified = true
    vim.notify(M.fallback_message(), vim.log.levels.WARN)
  end
  map_keys(bufnr, cfg.keys or {})
  if cfg.next_edit ~= false then
    require('dgemma.next_edit').attach(client, bufnr, cfg.next_edit)
  end
  local group = api.nvim_create_augroup('dgemma.canvas.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      clear_canvas(bufnr)
    end,
  })
end

--- Configure and start the client.
---@param opts? dgemma.Config
function M.setup(opts)
  local cfg = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.keys == false then
    cfg.keys = {}
  end
  M.config = cfg
  vim.api.nvim_set_hl(0, 'DgemmaDraft', { default = true, link = vim.fn.hlexists('ComplHint') == 1 and 'ComplHint' or 'Comment' })

  local cmd, problem = M.server_cmd(cfg)
  M.start_problem = problem
  local group = api.nvim_create_augroup('dgemma.start', { clear = true })
  -- The buffer the user last worked in, for :checkhealth (which runs in its own buffer).
  api.nvim_create_autocmd('BufEnter', {
    group = group,
    callback = function(ev)
      if vim.bo[ev.buf].buftype == '' then
        M.last_buf = ev.buf
      end
    end,
  })
  if problem then
    -- Without this, nothing would happen and only the LSP log would say why.
    vim.notify(M.missing_server_message(problem), vim.log.levels.ERROR)
    return
  end
  api.nvim_create_autocmd('LspProgress', { group = group, callback = on_progress })

  local lsp_config = {
    name = M.name,
    cmd = cmd,
    filetypes = cfg.filetypes,
    root_markers = cfg.root_markers,
    init_options = cfg.settings,
    -- Also answers workspace/configuration for section "dgemma".
    settings = { dgemma = cfg.settings },
    handlers = { ['dgemma/canvas'] = M.on_canvas, ['dgemma/outcome'] = M.on_outcome },
    on_attach = on_attach,
  }

  ---@param single_file? boolean no root marker = no root (as vim.lsp.enable does), so its client is reused
  local function start(bufnr, single_file)
    if not api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= '' or not api.nvim_buf_is_loaded(bufnr) then
      return
    end
    if cfg.filetypes and not vim.tbl_contains(cfg.filetypes, vim.bo[bufnr].filetype) then
      return
    end
    local root = vim.fs.root and vim.fs.root(bufnr, cfg.root_markers)
    local start_cfg = vim.deepcopy(lsp_config)
    start_cfg.root_markers = nil
    start_cfg.filetypes = nil
    start_cfg.root_dir = root or (not single_file and vim.fn.getcwd()) or nil
    start_cfg.handlers = lsp_config.handlers
    start_cfg.on_attach = on_attach
    vim.lsp.start(start_cfg, { bufnr = bufnr })
  end

  if vim.lsp.config and vim.lsp.enable then
    local enable_cfg = vim.deepcopy(lsp_config)
    enable_cfg.handlers, enable_cfg.on_attach = lsp_config.handlers, on_attach
    enable_cfg.root_markers = nil
    -- Only files: with `filetypes = nil` vim.lsp.enable would also start a server for the empty startup buffer
    -- and plugin buffers, each loading the model again.
    enable_cfg.root_dir = function(bufnr, on_dir)
      local name = api.nvim_buf_get_name(bufnr)
      if vim.bo[bufnr].buftype == '' and name ~= '' and not name:match('^%a[%w+.-]*://') then
        on_dir(vim.fs.root(bufnr, cfg.root_markers))
      end
    end
    vim.lsp.config(M.name, enable_cfg)
    vim.lsp.enable(M.name)
    if not cfg.filetypes then
      -- vim.lsp.enable attaches on FileType, which a buffer without a filetype never gets; "every normal buffer"
      -- includes those.
      local function start_plain(bufnr)
        local name = api.nvim_buf_get_name(bufnr)
        -- files only: plugin buffers (health://, fugitive://, ...) set their buftype after they are entered
        if vim.bo[bufnr].filetype == '' and name ~= '' and not name:match('^%a[%w+.-]*://')
          and #M.clients(bufnr) == 0 then
          start(bufnr, true)
        end
      end
      api.nvim_create_autocmd('BufWinEnter', { -- after filetype detection (BufEnter can come before it)
        group = group,
        callback = function(ev)
          vim.schedule(function()
            if api.nvim_buf_is_valid(ev.buf) then
              start_plain(ev.buf)
            end
          end)
        end,
      })
      for _, b in ipairs(api.nvim_list_bufs()) do
        start_plain(b)
      end
    end
    return
  end

  -- Neovim 0.10: no vim.lsp.config; start per buffer on FileType.
  api.nvim_create_autocmd('FileType', {
    group = group,
    callback = function(ev)
      start(ev.buf)
    end,
  })
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(b) and vim.bo[b].filetype ~= '' then
      start(b)
    end
  end
end

return M
