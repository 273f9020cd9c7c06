-- Neovim 0.12 next-edit suggestions end to end against dgemma-lsp (the tiny model; its answers are scripted with
-- the test-only launcher's dgemma.test.scriptNextEdit(Target), so the real canvas runs and only its text is known):
-- a rename on the def line, a pause, the rest of the rename shown as virtual text (old text struck, new text
-- inline), the jump key moves to it, the accept key applies it and the server names the next site, the jump key
-- goes there; the dismiss key hides a suggestion and reports it; a broken answer is never shown.
-- Run: nvim --headless -u NONE -S tests/editors/nvim/test_next_edit012.lua   (env: see harness.lua)
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/')
package.path = here .. '/?.lua;' .. package.path
local H = require('harness')
local api = vim.api

local CIRCLE = {
  'import math',
  '',
  '',
  'def area(r):',
  '    return math.pi * r * r',
  '',
  '',
  'def scaled(r, k):',
  '    return area(r) * k',
  '',
  '',
  'def label():',
  "    return 'circle'",
  '',
  '',
  'def volume(r, h):',
  '    return math.pi * r * r * h',
}

local function mark_texts(marks)
  local inline = {}
  for _, m in ipairs(marks) do
    for _, chunk in ipairs(m[4].virt_text or {}) do
      inline[#inline + 1] = chunk[1]
    end
  end
  return inline
end

H.run(function()
  H.check('neovim is 0.12+', vim.fn.has('nvim-0.12') == 1, tostring(vim.version()))
  local dgemma = H.load_plugin()
  dgemma.setup({
    cmd = H.server_cmd(),
    inline_completion = false,
    settings = { canvasLength = 192, denoisingSteps = 4, maxPrefixTokens = 128, maxSuffixTokens = 64 },
    next_edit = { delay_ms = 300 },
  })
  local ne = require('dgemma.next_edit')
  local path = H.write_file('circle.py', table.concat(CIRCLE, '\n') .. '\n')
  vim.cmd.edit(vim.fn.fnameescape(path))
  local buf = api.nvim_get_current_buf()
  local client = H.wait(60000, function()
    local c = dgemma.clients(buf)[1]
    return c and c.initialized and c
  end)
  H.check('plugin attached dgemma-lsp', client ~= nil)
  H.check('next-edit keys mapped', vim.fn.maparg('<M-y>', 'n', false, true).buffer == 1)
  local function command(name, ...)
    local res = client:request_sync('workspace/executeCommand', { command = name, arguments = { ... } }, 10000, buf)
    return res and res.result
  end
  H.check('model ready', H.wait(60000, function()
    local s = command('dgemma.status')
    return s and s.backend.state == 'ready'
  end, 200) ~= nil)

  -- 1. the user renames r -> radius on the def line; after a pause the rest of the rename is shown ---------------
  local renamed = vim.deepcopy(CIRCLE)
  renamed[4] = 'def area(radius):'
  local want = vim.deepcopy(renamed)
  want[5] = '    return math.pi * radius * radius'
  command('dgemma.test.scriptNextEditTarget', { uri = vim.uri_from_bufnr(buf), text = table.concat(want, '\n') .. '\n' })
  api.nvim_win_set_cursor(0, { 4, 9 })
  api.nvim_buf_set_text(buf, 3, 9, 3, 10, { 'radius' })
  local shown = H.wait(60000, function()
    local marks = ne.marks(buf)
    return #marks > 0 and marks
  end, 100)
  H.check('next edit shown after a pause', shown ~= nil and ne.stats.requests >= 1)
  local inline = mark_texts(shown)
  -- minimal edits: "r" -> "radius" keeps the r and inserts "adius" after it, at both sites of line 5
  H.check('new text shown inline at both sites', #inline == 2 and inline[1] == 'adius' and inline[2] == 'adius',
    vim.inspect(inline))
  H.check('shown on the line the edits change', shown[1][2] == 4 and shown[2][2] == 4)
  H.check('buffer unchanged while shown', H.buf_text(buf) == table.concat(renamed, '\n'))

  -- 2. jump to it, accept it --------------------------------------------------------------------------------------
  api.nvim_win_set_cursor(0, { 1, 0 })
  api.nvim_feedkeys(vim.keycode('<M-j>'), 'mx', false)
  H.check('jump key moves to the edit', api.nvim_win_get_cursor(0)[1] == 5, vim.inspect(api.nvim_win_get_cursor(0)))
  api.nvim_feedkeys(vim.keycode('<M-y>'), 'mx', false)
  H.check('accept applied every site', H.buf_text(buf) == table.concat(want, '\n'), H.buf_text(buf))
  H.check('marks cleared after accept', #ne.marks(buf) == 0)
  local target = H.wait(10000, function()
    return ne.state[buf] and ne.state[buf].jump
  end)
  -- the next r after the edit: def scaled(r, k) on line 8 (0-based 7)
  H.check('server named the next site', target ~= nil and target.line == 7 and target.character == 11, vim.inspect(target))
  local counts = command('dgemma.status').stats.counts
  H.check('accept reported to the server', (counts.next_edit_accepted or 0) >= 1, vim.inspect(counts))

  -- The accept's own edit does not start an automatic request (it would race the jump below for the answer).
  local asked = ne.stats.requests
  vim.wait(1000) -- past delay_ms: an automatic request would have gone out by now
  H.check('no automatic request for the accept itself', ne.stats.requests == asked,
    ('%d requests, %d before'):format(ne.stats.requests, asked))

  -- 3. jump to the next site (the server is asked there); dismiss what it shows ----------------------------------
  local answers = ne.stats.answers
  api.nvim_feedkeys(vim.keycode('<M-j>'), 'mx', false)
  H.check('jump key went to the named site', api.nvim_win_get_cursor(0)[1] == target.line + 1)
  H.check('asked again at the new site', H.wait(30000, function()
    return ne.stats.answers > answers
  end) ~= nil)
  ne.dismiss(buf) -- whatever the tiny model's own answer showed there
  local there = ne.state[buf].last.canvas.region
  H.check('region around the new site', there:find('def volume', 1, true) ~= nil, there)
  local next_site = there:gsub('volume%(r, h%)', 'volume(radius, h)'):gsub('r %* r %* h', 'radius * radius * h')
  command('dgemma.test.scriptNextEdit', next_site) -- the rename, carried on at the named site
  local before = H.buf_text(buf)
  local dismissed = ne.stats.dismissed
  api.nvim_feedkeys(vim.keycode('<M-n>'), 'mx', false)
  H.check('request key shows a next edit', H.wait(30000, function()
    return #ne.marks(buf) > 0
  end, 100) ~= nil)
  api.nvim_feedkeys(vim.keycode('<M-e>'), 'mx', false)
  H.check('dismiss hides it', #ne.marks(buf) == 0 and ne.stats.dismissed == dismissed + 1)
  H.check('dismiss leaves the buffer as it was', H.buf_text(buf) == before)
  H.check('dismiss reported to the server', H.wait(10000, function()
    return (command('dgemma.status').stats.counts.next_edit_rejected or 0) >= 1
  end) ~= nil)

  -- 4. a broken answer is never shown -----------------------------------------------------------------------------
  command('dgemma.test.scriptNextEdit', (there:gsub('def volume%(r, h%):', 'def volume(r, h:')))
  local answered
  ne.request(buf, function(res)
    answered = res
  end)
  H.check('broken answer refused by the server', H.wait(30000, function()
    return answered
  end) ~= nil and #answered.edits == 0, answered and answered.reason)
  H.check('nothing shown for it', #ne.marks(buf) == 0)
end)
