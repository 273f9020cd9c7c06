--- :checkhealth dgemma — Neovim version, server command, `dgemma-lsp doctor`, running clients and backend status.
local M = {}

local health = vim.health

--- The server command with `doctor` in place of `--stdio`; server-only options (--log-file) are dropped because
--- the doctor subcommand does not take them.
local function doctor_cmd(cmd)
  local out, skip = {}, false
  for _, a in ipairs(cmd) do
    if skip then
      skip = false
    elseif a == '--log-file' then
      skip = true
    elseif not a:match('^%-%-log%-file=') then
      out[#out + 1] = (a == '--stdio') and 'doctor' or a
    end
  end
  return out
end

local function run_doctor(cmd, server_ready, gate_known)
  health.start('dgemma: dgemma-lsp doctor')
  local args = doctor_cmd(cmd)
  if server_ready then
    -- The running server already proved that the model loads; skip loading it a second time (tens of seconds).
    args[#args + 1] = '--no-load'
  end
  local ok, res = pcall(function()
    return vim.system(args, { text = true }):wait(120000)
  end)
  if not ok or not res then
    health.error('could not run doctor: ' .. tostring(res))
    return
  end
  local text = ((res.stdout or '') .. (res.stderr or '')):gsub('%s+$', '')
  for line in vim.gsplit(text, '\n', { plain = true }) do
    -- The gate doctor derives from the command line alone; the running server's (editor settings included) is above.
    if line ~= '' and not (gate_known and line:match('^%s*suggestions%s')) then
      health.info(line)
    end
  end
  if res.code == 0 then
    health.ok('doctor: everything needed is present' .. (server_ready and ' (model load checked by the running server)' or ''))
  else
    health.error(('doctor exited with %d: see the lines above for what is missing'):format(res.code))
  end
end

function M.check()
  local dgemma = require('dgemma')
  health.start('dgemma: Neovim')
  local v = vim.version()
  if dgemma.has_inline_completion() then
    health.ok(('Neovim %d.%d.%d: inline completion (ghost text) available'):format(v.major, v.minor, v.patch))
  elseif vim.fn.has('nvim-0.10') == 1 then
    health.warn(dgemma.fallback_message(), { 'Install Neovim 0.12 or newer for ghost text.' })
  else
    health.error('Neovim 0.10 or newer is required.')
  end

  health.start('dgemma: configuration')
  local cfg = dgemma.config
  if not cfg then
    health.warn('setup() has not been called', { "Add require('dgemma').setup({}) to your config (lazy.nvim: opts = {})." })
    cfg = dgemma.defaults
  else
    health.ok('setup() called')
  end
  local cmd, problem = dgemma.server_cmd(cfg)
  if not problem then
    health.ok('server command: ' .. table.concat(cmd, ' '))
  else
    health.error(problem, {
      'bash scripts/setup in the dgemma-lsp repository creates .venv/bin/dgemma-lsp (found automatically)',
      "or require('dgemma').setup({ cmd = { '/path/to/.venv/bin/dgemma-lsp', '--stdio' } })",
    })
    return
  end

  health.start('dgemma: running server')
  local clients = dgemma.clients()
  if #clients == 0 then
    health.warn('no dgemma-lsp client is running', {
      'Open a file: the client attaches to normal buffers' .. (cfg.filetypes and (' of filetypes ' .. table.concat(cfg.filetypes, ', ')) or ''),
      ':LspLog shows why a start failed',
    })
    run_doctor(cmd, false)
    return
  end
  for _, c in ipairs(clients) do
    local bufs = vim.tbl_keys(c.attached_buffers or {})
    local root = c.root_dir or c.config.root_dir
    health.ok(('client %d attached to %d buffer(s), %s'):format(
      c.id, #bufs, type(root) == 'string' and ('root ' .. root) or 'no workspace root (single files)'))
  end
  local status, err = dgemma.status(10000)
  if not status then
    health.warn('dgemma.status failed: ' .. tostring(err))
  else
    local function flat(t, prefix, out)
      for k, val in pairs(t) do
        local key = prefix and (prefix .. '.' .. k) or tostring(k)
        if val == vim.NIL then
          -- JSON null: nothing to report
        elseif type(val) == 'table' and not vim.islist(val) then
          flat(val, key, out)
        else
          out[#out + 1] = ('%s: %s'):format(key, type(val) == 'table' and vim.inspect(val) or tostring(val))
        end
      end
      return out
    end
    -- Server and backend facts; the full settings list is one :DgemmaStatus away.
    local shown = {}
    if type(status) == 'table' then
      shown = { server = status.server, backend = status.backend }
      if type(status.settings) == 'table' then
        shown.settings = { backend = status.settings.backend, model = status.settings.model, device = status.settings.device }
      end
    end
    local lines = type(status) == 'table' and flat(shown, nil, {}) or { tostring(status) }
    table.sort(lines)
    for _, line in ipairs(lines) do
      health.info(line)
    end
    health.ok('server answers dgemma.status')
  end
  local ready = type(status) == 'table' and type(status.backend) == 'table' and status.backend.state == 'ready'
  local gate = type(status) == 'table' and type(status.gate) == 'table' and status.gate or nil
  if gate and type(gate.min_confidence) == 'number' then
    local from = ({ setting = 'your minConfidence setting', model = "the model's own recommendation" })[gate.from]
      or 'the model is still loading: its recommendation applies once loaded'
    if gate.min_confidence > 0 then
      health.info(('suggestion gate in force: withheld below confidence %.2f (%s)'):format(gate.min_confidence, from))
    else
      health.info(('suggestion gate in force: min_confidence 0, every suggestion shown (%s)'):format(from))
    end
  end
  M.report_buffer(dgemma)
  local here = vim.api.nvim_get_current_buf()
  if vim.bo[here].buftype ~= '' then
    here = dgemma.last_buf or vim.fn.bufnr('#')
  end
  local last = here and here > 0 and dgemma.outcome(here) or nil
  if last then
    health.info(('last suggestion in that buffer (%s): %s%s'):format(
      last.feature,
      dgemma.outcome_text(last),
      (last.reason and last.reason ~= '' and last.state ~= 'shown') and (' — ' .. last.reason) or ''
    ))
  end
  run_doctor(cmd, ready, gate ~= nil)
end

--- The buffer the user came from (:checkhealth runs in a buffer of its own): attached? ghost text on?
function M.report_buffer(dgemma)
  local buf = vim.api.nvim_get_current_buf()
  if vim.bo[buf].buftype ~= '' then
    buf = dgemma.last_buf or vim.fn.bufnr('#')
  end
  if not buf or buf < 1 or not vim.api.nvim_buf_is_valid(buf) then
    health.info('no file buffer to report on')
    return
  end
  local name = vim.api.nvim_buf_get_name(buf)
  local ft = vim.bo[buf].filetype
  local what = ('buffer %d (%s, filetype %s)'):format(
    buf, name ~= '' and vim.fn.fnamemodify(name, ':~:.') or '[No Name]', ft ~= '' and ft or 'none')
  if #dgemma.clients(buf) == 0 then
    health.warn(what .. ': dgemma-lsp is not attached', {
      dgemma.config and dgemma.config.filetypes and ('filetypes = { ' .. table.concat(dgemma.config.filetypes, ', ') .. ' }')
        or 'every normal buffer is attached: :LspLog shows why a start failed',
    })
    return
  end
  if dgemma.has_inline_completion() then
    if vim.lsp.inline_completion.is_enabled({ bufnr = buf }) then
      health.ok(what .. ': attached, inline completion enabled')
    else
      health.info(what .. ': attached, inline completion off (:DgemmaToggle there)')
    end
  else
    health.ok(what .. ': attached (code actions and diagnostics)')
  end
end

return M
