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
  local dgemma = require('dgemma')
  local result, err = dgemma.status()
  if not result then
    vim.notify('dgemma: ' .. tostring(err), vim.log.levels.WARN)
  else
    local last = dgemma.outcome_text(dgemma.outcome())
    local head = ('this buffer: %s; gate in force: %s'):format(
      last or 'no suggestion requested yet',
      type(result.gate) == 'table' and ('%.2f (%s)'):format(result.gate.min_confidence or 0, result.gate.from) or '?'
    )
    vim.notify(head .. '\n' .. vim.inspect(result), vim.log.levels.INFO)
  end
end, { desc = 'dgemma: show server, backend and model status' })

vim.api.nvim_create_user_command('DgemmaExplain', function()
  local result, err = require('dgemma').explain()
  if not result then
    vim.notify('dgemma: ' .. tostring(err), vim.log.levels.WARN)
  else
    vim.notify(result.text, vim.log.levels.INFO)
  end
end, { desc = 'dgemma: why the last suggestion here was shown or not (what was sent, what came back)' })

vim.api.nvim_create_user_command('DgemmaToggle', function()
  local ic = vim.lsp.inline_completion
  if not ic then
    vim.notify(require('dgemma').fallback_message(), vim.log.levels.WARN)
    return
  end
  ic.enable(not ic.is_enabled({ bufnr = 0 }), { bufnr = 0 })
end, { desc = 'dgemma: toggle inline suggestions in this buffer' })
