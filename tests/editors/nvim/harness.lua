-- Shared driver for the headless Neovim tests: coroutine steps that wait without blocking the event loop (so
-- typeahead, mode changes and LSP callbacks keep running), a result file, and a hard deadline.
--
-- Environment: DGEMMA_PLUGIN_DIR (editors/nvim), DGEMMA_LSP_CMD (JSON list: the server command), DGEMMA_RESULT
-- (where the JSON result goes), DGEMMA_WORKDIR (a scratch folder), DGEMMA_TIMEOUT_S (overall deadline).
local H = {}

H.result = { ok = false, checks = {}, log = {} }
H.t0 = vim.uv.now()

function H.log(fmt, ...)
  local line = (select('#', ...) > 0) and fmt:format(...) or fmt
  line = ('%6.1fs %s'):format((vim.uv.now() - H.t0) / 1000, line)
  table.insert(H.result.log, line)
  io.stderr:write('[nvim-test] ' .. line .. '\n')
end

local function finish(ok, err)
  H.result.ok = ok
  H.result.error = err
  local path = os.getenv('DGEMMA_RESULT')
  if path then
    local f = assert(io.open(path, 'w'))
    f:write(vim.json.encode(H.result))
    f:close()
  end
  vim.schedule(function()
    vim.cmd(ok and 'qall!' or 'cquit! 1')
  end)
end

--- Record a named check; a failed check aborts the test with its message.
function H.check(name, cond, detail)
  H.result.checks[name] = { ok = cond and true or false, detail = detail }
  H.log('%s %s%s', cond and 'PASS' or 'FAIL', name, detail and (': ' .. tostring(detail)) or '')
  if not cond then
    error(('check failed: %s%s'):format(name, detail and (': ' .. tostring(detail)) or ''), 0)
  end
end

local co
--- Wait (yielding to the event loop) until fn() returns a truthy value or the timeout passes; returns that value.
function H.wait(timeout_ms, fn, every_ms, on_tick)
  local deadline = vim.uv.now() + timeout_ms
  while true do
    local v = fn()
    if v then
      return v
    end
    if vim.uv.now() > deadline then
      return nil
    end
    if on_tick then
      on_tick()
    end
    local me = co
    vim.defer_fn(function()
      local ok, err = coroutine.resume(me)
      if not ok then
        finish(false, tostring(err))
      end
    end, every_ms or 50)
    coroutine.yield()
  end
end

function H.sleep(ms)
  local t = vim.uv.now() + ms
  H.wait(ms + 1000, function()
    return vim.uv.now() >= t
  end)
end

--- Put the plugin on the runtimepath and load it as a user's config would.
function H.load_plugin()
  local dir = assert(os.getenv('DGEMMA_PLUGIN_DIR'), 'DGEMMA_PLUGIN_DIR not set')
  vim.opt.runtimepath:prepend(dir)
  vim.cmd('filetype on')
  vim.cmd('runtime! plugin/dgemma.lua')
  return require('dgemma')
end

function H.server_cmd()
  return vim.json.decode((assert(os.getenv('DGEMMA_LSP_CMD'), 'DGEMMA_LSP_CMD not set')))
end

function H.write_file(name, text)
  local dir = assert(os.getenv('DGEMMA_WORKDIR'), 'DGEMMA_WORKDIR not set')
  local path = dir .. '/' .. name
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
  return path
end

function H.buf_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr or 0, 0, -1, false), '\n')
end

--- Run `body` as the test; every error ends Neovim with a failing exit status and the result file says why.
function H.run(body)
  local timeout = tonumber(os.getenv('DGEMMA_TIMEOUT_S') or '240') * 1000
  vim.defer_fn(function()
    finish(false, ('test timed out after %d ms'):format(timeout))
  end, timeout)
  co = coroutine.create(function()
    local ok, err = xpcall(body, debug.traceback)
    finish(ok, not ok and tostring(err) or nil)
  end)
  vim.schedule(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      finish(false, tostring(err))
    end
  end)
end

return H
