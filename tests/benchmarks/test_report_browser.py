"""The committed results as a person and CI see them, from one build of the committed snapshot: every file of
``benchmarks/results`` equals its rebuild (`suite bench report --check`), and report.html opened in headless Chromium
at 1,280 px (Debian's ``chromium``; ``.ci/run`` installs it where it is missing): no horizontal scrolling, every image
loads, no console error, the findings table is the first table, the page under 1.5 MB. No screenshot is kept."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.report import RESULTS, SNAPSHOT, build, differ
from benchmarks.report.figures import without_pixels
from suite.registry import open_registry

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.target && e.target.src)), true);
const _err = console.error; console.error = (...a) => { window.__errors.push(a.join(' ')); _err(...a); };
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const first = document.querySelector('table');
  const out = {scroll: document.documentElement.scrollWidth, width: window.innerWidth,
               images: imgs.length, broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length,
               alt: imgs.filter(i => !i.alt).length, errors: window.__errors,
               uncaptioned: [...document.querySelectorAll('figure')].filter(f => !f.querySelector('figcaption')).length,
               wide: imgs.filter(i => i.getBoundingClientRect().right > window.innerWidth).length,
               wideTables: [...document.querySelectorAll('table')].filter(
                 t => t.getBoundingClientRect().right > window.innerWidth + 1).length,
               h2: [...document.querySelectorAll('h2')].map(h => h.textContent),
               h3: [...document.querySelectorAll('h3')].map(h => h.textContent),
               first: first ? [...first.rows[0].cells].map(c => c.textContent) : []};
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every results file built from the committed snapshot as `suite bench report --check` builds it (the images left
    empty: compared without their pixels), runs from uncommitted code left out (the tests' conftest lets them in)."""
    out = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as mp, without_pixels():
        mp.delenv("SUITE_ALLOW_DIRTY", raising=False)
        build(open_registry(os.path.relpath(SNAPSHOT)), out)
    return out


def test_committed_results_rebuild_from_the_snapshot(rebuilt: Path) -> None:
    """every table, README.md and report.html (text) in benchmarks/results equals its rebuild from registry.jsonl: a
    change to a table's code or a run merged into the snapshot without `suite bench report` fails here"""
    assert differ(rebuilt, RESULTS) == []


def probe(html: str, tmp_path: Path) -> dict:
    """The page opened in headless Chromium at 1,280 px, what the probe script saw."""
    assert CHROMIUM is not None
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                          "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', res.stdout, flags=re.S)
    assert found, res.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium package)")
def test_report_page_in_a_real_browser(tmp_path: Path) -> None:
    """The committed page, as a person opens it (its text equals the rebuild: the test above)."""
    page = RESULTS / "report.html"
    assert page.stat().st_size < 1.5 * 2**20
    out = probe(page.read_text(encoding="utf-8"), tmp_path)
    assert out["scroll"] <= out["width"], out  # no horizontal scrolling at 1,280 px
    assert out["images"] > 0 and out["broken"] == 0 and out["alt"] == 0, out
    assert out["errors"] == [], out
    assert out["first"][:3] == ["paper", "claim", "paper's gap"], out  # the findings table comes first
    assert out["uncaptioned"] == 0 and out["wide"] == 0 and out["wideTables"] == 0, out
    # findings first, then one section per modality; molecules: the full protocol above its cpu reduction
    assert out["h2"][:5] == ["Findings", "Graphs", "Images", "Sentences", "Synthetic data"], out["h2"]
    h3 = out["h3"]
    full = h3.index("MoleculeNet transfer at Hu et al.'s fine-tuning protocol (headline)")
    assert full < next(i for i, t in enumerate(h3) if t.startswith("MoleculeNet transfer, reduced")), h3


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium package)")
def test_comparison_page_in_a_real_browser(tmp_path: Path) -> None:
    """`bench compare`'s page for a loss in a file outside the project, its baselines imported from the committed
    snapshot and its own MUTAG runs logged: no horizontal scrolling at 1,280 px, every figure loads with its caption,
    no console error, the findings first, the loss named by its class (the path once, in the header)"""
    from benchmarks.report.compare import page
    from benchmarks.runner.compare import SUITES, all_jobs, import_baselines, plan
    from suite.registry import Registry

    loss = "/some/dir/my_loss.py:PairCos"
    _, tasks, _ = plan(SUITES / "quick.yaml", "dcl")
    for t in tasks:  # the user's loss in the arms of "dcl" (its jobs differ only in the loss)
        t.arms[loss] = t.arms.pop("dcl")
    reg = Registry(str(tmp_path / "r.sqlite"))
    import_baselines(reg, all_jobs(tasks))
    for job, v in zip(tasks[0].arms[loss], (0.84, 0.85, 0.86)):
        with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss=loss, seed=job.seed,
                     cfg_hash=job.hash) as run:
            run.set_primary("acc", "test")
            run.log("acc", v, split="test")
    _, doc = page(reg, "quick", tasks, loss, {"sha256": "cd" * 32, "import": loss}, {}, None, [])
    out = probe(doc, tmp_path)
    assert out["scroll"] <= out["width"] and out["wide"] == 0 and out["wideTables"] == 0, out
    assert out["images"] > 0 and out["broken"] == 0 and out["alt"] == 0 and out["uncaptioned"] == 0, out
    assert out["errors"] == [], out
    assert out["h2"][:2] == ["Findings", "Verdicts"], out["h2"]
    assert doc.count("/some/dir/my_loss.py") == 1 and "<h1>PairCos beside" in doc
    assert "macl</td><td>3</td>" in doc  # the imported MACL runs the runner counts done are on the page
