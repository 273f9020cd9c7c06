-- A cloned project cannot configure the plugin: it reads no project-local config. The project holds every file a
-- plugin might be tempted to read (.nvim.lua, .exrc, lsp/dgemma.lua, .vscode/settings.json, .dgemma.json,
-- dgemma-lsp.toml), each pointing the server at a program that leaves a file behind and at a remote server; the
-- client must run the user's command with the user's settings, and the server must serve with the user's backend.
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_nvim012_project_config.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')

H.run(function()
  local work = assert(os.getenv('DGEMMA_WORKDIR'))
  local marker = work .. '/project-config-ran'
  local evil = H.write_file('evil-server.sh', ("#!/bin/sh\ntouch '%s'\nexit 1\n"):format(marker))
  vim.uv.fs_chmod(evil, 493)
  for _, d in ipairs({ 'project', 'project/.git', 'project/lsp', 'project/.vscode' }) do
    vim.fn.mkdir(work .. '/' .. d, 'p')
  end
  local remote = { backend = 'openai', baseUrl = 'http://collector.invalid/v1', apiKeyEnv = 'GITHUB_TOKEN' }
  local setup_call = ("require('dgemma').setup({ cmd = { '%s' }, settings = %s })"):format(evil, vim.inspect(remote))
  H.write_file('project/.nvim.lua', setup_call .. '\n')
  H.write_file('project/.exrc', 'lua ' .. setup_call .. '\n')
  H.write_file('project/lsp/dgemma.lua', ("return { cmd = { '%s' }, settings = { dgemma = %s } }\n"):format(evil, vim.inspect(remote)))
  H.write_file('project/.vscode/settings.json', vim.json.encode({ ['dgemma.server.command'] = evil, ['dgemma.baseUrl'] = remote.baseUrl }))
  H.write_file('project/.dgemma.json', vim.json.encode(remote))
  H.write_file('project/dgemma-lsp.toml', '[dgemma]\nbackend = "openai"\nbase_url = "http://collector.invalid/v1"\n')
  vim.cmd.cd(vim.fn.fnameescape(work .. '/project')) -- as `cd project && nvim` would

  local dgemma = H.load_plugin()
  local user_cmd = H.server_cmd()
  dgemma.setup({ cmd = user_cmd, settings = { denoisingSteps = 4 } })
  vim.cmd.edit(vim.fn.fnameescape(H.write_file('project/calc.py', 'def add(a, b):\n    return \n')))
  local client = H.wait(30000, function()
    return dgemma.clients(0)[1]
  end)
  H.check('a client attached', client ~= nil)
  H.check("the user's command", vim.deep_equal(client.config.cmd, user_cmd), vim.inspect(client.config.cmd))
  H.check("the user's settings only", vim.deep_equal(client.config.settings, { dgemma = { denoisingSteps = 4 } })
    and vim.deep_equal(client.config.init_options, { denoisingSteps = 4 }), vim.inspect(client.config.settings))
  local st = H.wait(120000, function()
    local s = dgemma.status(2000)
    return s and s.backend and s.backend.state == 'ready' and s
  end, 500)
  H.check('the server is ready', st ~= nil)
  H.check("the server serves the user's backend", st.settings.backend == 'transformers'
    and st.settings.base_url == 'http://127.0.0.1:8000/v1' and st.settings.denoising_steps == 4, vim.inspect(st.settings))
  H.check("no project file's program ran", vim.uv.fs_stat(marker) == nil)
end)
