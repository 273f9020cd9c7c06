"""The CPU benchmarks still run: each script in a tiny configuration (a few requests), from the command line.

No timings are asserted here (speed targets are checked by the benchmarks themselves, not by timed tests); only
that the scripts run end to end against the real server and report what they promise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_report(*args: str) -> str:
    """Runs a bench script that prints its report (it must exit 0); returns what it printed."""
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT, env=dict(os.environ, HF_HUB_OFFLINE="1"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def run_script(args: list[str], tmp_path: Path) -> tuple[dict, str]:
    out = tmp_path / "result.json"
    md = tmp_path / "result.md"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [sys.executable, *args, "--json", str(out), "--markdown", str(md)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(out.read_text()), md.read_text()


def test_lsp_overhead_runs(tmp_path: Path) -> None:
    data, md = run_script(
        [
            "bench/lsp_overhead.py",
            "--sizes",
            "200,400",
            "--requests",
            "12",
            "--warmup",
            "2",
            "--cache-hits",
            "4",
            "--edits",
            "4",
            "--diag-passes",
            "1",
        ],
        tmp_path,
    )
    results = data["results"]
    assert [r["lines"] for r in results] == [200, 400]
    for r in results:
        assert r["complete_miss_rtt"]["n"] == 12 and r["complete_hit_rtt"]["n"] == 4
        assert r["complete_miss_engine"]["count"] >= 12  # the completion engine timed every request itself
        assert r["complete_miss_server"]["n"] == 12 and r["complete_hit_server"]["n"] == 4  # the server-side trace
        assert r["edit_server"]["n"] == 4
        counts = r["counts"]
        assert counts["generations_started"] == 14 and counts["cache_hits"] == 4  # misses reached the backend
        assert r["edit_plus_probe_rtt"]["n"] == 4 and r["edit_in_process"]["n"] == 4
        assert r["diag_server"]["count"] >= 2 and r["diag_client_minus_debounce"]["n"] == 1
        assert r["rss_peak_mib"] and r["rss_peak_mib"] >= r["rss_python_phase_mib"]
    assert "| lines (chars) |" in md and "Ratios:" in md and "nproc" in md


def test_cpu_e2e_runs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    settings = {"denoisingSteps": 2, "singleLineCanvas": 8, "multiLineCanvas": 16, "maxPrefixTokens": 128}
    data, md = run_script(
        [
            "bench/cpu_e2e.py",
            "--model",
            str(tiny_checkpoint),
            "--functions",
            "1",
            "--max-keys",
            "6",
            "--gap-ms",
            "5-10",
            "--pause-ms",
            "50",
            "--threads",
            "1",
            "--settings",
            json.dumps(settings),
        ],
        tmp_path,
    )
    (r,) = data["results"]
    assert r["keystrokes"] == 6
    assert sum(r["outcomes"].values()) == 6  # every request got an answer (a suggestion, empty, or cancelled)
    counts = r["counts"]
    assert counts["requests"] == 6 and counts["edits"] == 6
    started = counts.get("generations_started", 0)
    ended = sum(counts.get(f"generations_{k}", 0) for k in ("completed", "cancelled", "failed", "timeout"))
    assert started >= 1 and ended == started  # no generation left running after the session
    assert r["settings"]["denoising_steps"] == 2
    assert "| checkpoint |" in md


def test_keystroke_e2e_runs(tmp_path: Path) -> None:
    """The keystroke-to-ghost-text benchmark on the benchmark-only instant backend: every request is matched to its
    canvas notifications, none lost or out of order, and the server's share is measured."""
    data, md = run_script(
        ["bench/keystroke_e2e.py", "--server", "instant", "--functions", "1", "--max-keys", "24",
         "--gap-ms", "10-20", "--pause-ms", "50"],
        tmp_path,
    )  # fmt: skip
    single = data["results"][0]
    assert single["keystrokes"] == 24 and single["server_alive"]
    generated = single["modes"]["single"]["requests"] + single["modes"]["multi"]["requests"]
    assert 1 <= generated <= 24  # the others answered from the cache or by typing-through, without a canvas
    assert single["modes"]["single"]["final_ms"]["n"] >= 1 and single["modes"]["single"]["first_draft_ms"]["n"] >= 1
    assert single["canvas_sent"] == single["canvas_received"] > 0 and single["out_of_order"] == 0
    assert single["generations_started"] >= 1 and single["server_share_p50_ms"] is not None
    assert single["first_after_ready_ms"] is not None
    assert "| config | mode (n) |" in md


def test_keystroke_e2e_next_edits_run(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """The next-edit phase through the real server on the tiny DiffusionGemma (CPU): after the typing run, every
    rename gets a ``dgemma/nextEdit`` and a ``textDocument/copilotInlineEdit`` answer, none an error, each timed,
    and each ran a seeded canvas."""
    settings = {"denoisingSteps": 2, "singleLineCanvas": 8, "multiLineCanvas": 16, "maxPrefixTokens": 128}
    data, md = run_script(
        ["bench/keystroke_e2e.py", "--server", "dgemma-lsp", "--server-args", f"--model {tiny_checkpoint} --device cpu",
         "--settings", json.dumps(settings), "--functions", "1", "--max-keys", "4", "--gap-ms", "5-10",
         "--pause-ms", "50", "--next-edit", "4"],
        tmp_path,
    )  # fmt: skip
    ne = data["results"][0]["next_edit"]
    assert ne["requests"] == 4 and ne["errors"] == 0 and ne["copilot"]["requests"] == 4
    assert ne["rtt_ms"]["n"] == 4 and ne["rtt_ms"]["p50"] > 0 and ne["server_ms"]["n"] == 4
    assert ne["steps"]["p50"] == 2 and ne["canvas"]["p50"] >= 8  # the seeded canvas ran its steps
    counts = ne["server_counts"]
    assert counts["next_edit_requests"] == 8  # both methods reached the next-edit engine
    assert counts.get("next_edit_offered", 0) + counts.get("next_edit_silent", 0) == 8
    assert ne["offered"] + sum(ne["reasons"].values()) == 4  # an offer or a reason, for every request
    assert "| config | next edits (n) |" in md and f"| {ne['offered']} of 4 | 0 |" in md


def test_next_edit_data_runs() -> None:
    """The next-edit generator's cost benchmark draws real examples from the interpreter's files and reports them
    (about one draw in ten passes the server's own gates since the candidate-site regions)."""
    stdout = run_report("bench/next_edit_data.py", "--draws", "30", "--seeds", "1", "--files", "80")
    line = stdout.strip().splitlines()[-1]
    assert line.startswith("seed 1: 30 draws, ") and " ms per example, " in line and line.endswith("(80 files)")
    assert int(line.split(", ")[1].split()[0]) >= 1  # at least one example made


def test_next_edit_eval_reports_how_answers_line_up(tmp_path: Path) -> None:
    """``--rows`` re-reports saved rows (no model run), with the token-by-token alignment: an answer that copies the
    seed scores 1.0 against the region after the first edit; the right answer scores 1.0 against the target."""

    def row(region: str, want: str, raw: str) -> dict:
        return {
            "pattern": "rename", "source": "x.py:1", "expects_change": True, "offered": False, "exact": raw == want,
            "raw_exact": raw == want, "raw_unchanged": raw == region, "oracle_passes": True, "reason": "no change",
            "confidence": 0.5, "steps": 4, "wall_s": 0.1, "region_lines": 2, "region": region, "want": want, "raw": raw,
        }  # fmt: skip

    longer = ("def f(n):\n    return n + n\n", "def f(n_items_seen):\n    return n_items_seen + n_items_seen\n")
    same = ("x = 1\ny = 1\n", "x = 2\ny = 2\n")
    rows = [row(*longer, longer[0]), row(*same, same[1])]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    stdout = run_report("bench/next_edit_eval.py", "--rows", str(tmp_path / "rows.json"))
    out = stdout
    assert "exact-match rate (change cases): 1/2" in out
    changes = next(line for line in out.splitlines() if line.startswith("token count changes: 1 cases"))
    assert "equal to the seed's (the region) from it on" in changes and changes.endswith("(1.00)")
    kept = next(line for line in out.splitlines() if line.startswith("same token count: 1 cases"))
    assert "(1.00); equal to the seed's" in kept  # the right answer: every token after the first edit is the target's


def test_cpu_keystroke_runs(tmp_path: Path) -> None:
    """Quiet and with one busy process beside it, on the tiny checkpoint: a row per pass, the cache's share."""
    from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint

    out = run_report("bench/cpu_keystroke.py", "--models", str(ensure_tiny_checkpoint()), "--load", "1",
                     "--max-keys", "6", "--functions", "1", "--line-pause-ms", "300", "--context-chars", "800",
                     "--backend-keys", "2")  # fmt: skip
    rows = [line for line in out.splitlines() if "| quiet |" in line or "| +1 busy |" in line]
    assert len(rows) == 2 and "keystroke -> final" in out, out
    assert all("bfloat16" in r or "float32" in r for r in rows)  # the backend's own report reached the table
    assert "The backend alone" in out


def test_next_edit_real_runs_the_frozen_cases_and_its_manifest_names_each_licence(tiny_checkpoint: Path) -> None:
    """The frozen real-history set loads, every package of it is in the manifest with a licence, none is reserved;
    a few cases run through the real server with the right answer scripted (the ceiling) and are reported per kind."""
    sys.path.insert(0, str(ROOT / "bench"))
    from next_edit_real_cases import RESERVED, load

    files, cases = load()
    manifest = (ROOT / "fixtures" / "next_edit_real" / "MANIFEST.md").read_text()
    assert len(cases) >= 300 and {c["file"] for c in cases} <= set(files)
    for pkg in {c["package"] for c in cases}:
        assert f"| {pkg} |" in manifest and pkg.lower() not in RESERVED
    stdout = run_report(
        "bench/next_edit_real.py",
        "--mode",
        "ceiling",
        "--split",
        "held",
        "--limit",
        "4",
        "--model",
        str(tiny_checkpoint),
    )
    assert "held (4 cases)" in stdout and ("| all changes |" in stdout or "| none |" in stdout), stdout
    assert "latency per request" in stdout


def test_next_edit_real_offline_replays_the_servers_region_and_judge() -> None:
    """The in-process replay of the ceiling (no server): outcomes and a cause for every miss."""
    stdout = run_report("bench/next_edit_real_offline.py", "--split", "dev", "--limit", "30")
    assert "dev (30 cases)" in stdout and "changes 19: exact" in stdout and "causes:" in stdout, stdout
