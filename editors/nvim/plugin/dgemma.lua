-- User commands for dgemma.nvim. Loading this file starts nothing: call require('dgemma').setup{} (lazy.nvim's
-- `opts = {}` does) so the server only runs when you ask for it.
if vim.g.loaded_dgemma then
  return
end
vim.g.loaded_dgemma = true

vim.api.nvim_create_user_command('DgemmaFix', function()
  require('dgemma').fix_structure()
end, { desc = 'dgemma: fix JSON/Markdown structure (validated code action)' })

vim.api.nvim_create_user_command('DgemmaRewrite', function(a)
  require('dgemma').rewrite(a.line1, a.line2)
end, { range = true, desc = 'dgemma: rewrite the selected lines with the model' })

vim.api.nvim_create_user_command('DgemmaStatus', function()
  local result, err = require('dgemma').status()
  if not result then
    vim.notify('dgemma: ' .. tostring(err), vim.log.levels.WARN)
  else
    vim.notify(vim.inspect(result), vim.log.levels.INFO)
  end
end, { desc = 'dgemma: show server, backend and model status' })

vim.api.nvim_create_user_command('DgemmaToggle', function()
  local ic = vim.lsp.inline_completion
  if not ic then
    vim.notify(require('dgemma').fallback_message(), vim.log.levels.WARN)
    return
  end
  ic.enable(not ic.is_enabled({ bufnr = 0 }), { bufnr = 0 })
end, { desc = 'dgemma: toggle inline suggestions in this buffer' })
