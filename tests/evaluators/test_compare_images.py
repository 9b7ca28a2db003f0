"""compare_images (VLC's snapshot task fba2c100) against desktop-env's.

Upstream's function (desktop_env/evaluators/metrics/vlc.py) is run from the installed wheel's
source, with the modules vlc.py imports for its other metrics (acoustid, cv2, librosa...)
stubbed. Its SSIM is skimage's ``structural_similarity``: the real one when scikit-image is
installed, else ``_skimage_ssim`` below, a transcription of skimage's default path (7x7
``scipy.ndimage.uniform_filter``, sample covariance, K1 0.01, K2 0.03, the uint8 data range,
a border of 3 cropped). osguard's own SSIM (numpy only) must agree with it to 1e-9, and both
give exactly 1.0 for the same grey pixels, which is what osguard counts as a success.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from osguard.builder.steps import load_generator
from osguard.evaluators import metrics as ours

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")

TASKS = Path(__file__).resolve().parents[2] / "tasks"
GOLD = TASKS / "gold" / "fba2c100-79e8-42df-ae74-b592418d54f4" / "interstellar_gold.png"


def _skimage_ssim(im1, im2):
    from scipy.ndimage import uniform_filter

    x, y = im1.astype(np.float64), im2.astype(np.float64)
    win, np_ = 7, 49
    cov_norm = np_ / (np_ - 1)
    ux, uy = uniform_filter(x, size=win), uniform_filter(y, size=win)
    uxx, uyy, uxy = uniform_filter(x * x, size=win), uniform_filter(y * y, size=win), uniform_filter(x * y, size=win)
    vx, vy, vxy = cov_norm * (uxx - ux * ux), cov_norm * (uyy - uy * uy), cov_norm * (uxy - ux * uy)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
    return s[3:-3, 3:-3].mean(dtype=np.float64)


@pytest.fixture(scope="module")
def theirs():
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or spec.origin is None:
        pytest.skip("desktop-env is not installed (pip install desktop-env --no-deps)")
    pytest.importorskip("scipy.ndimage")
    source = Path(spec.origin).parent / "evaluators" / "metrics" / "vlc.py"
    try:
        from skimage.metrics import structural_similarity
    except ImportError:
        structural_similarity = _skimage_ssim
    stubs = {name: types.ModuleType(name) for name in ("acoustid", "cv2", "imagehash", "librosa", "fastdtw",
                                                        "skimage", "skimage.metrics")}
    stubs["fastdtw"].fastdtw = None
    stubs["skimage.metrics"].structural_similarity = structural_similarity
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update({name: module for name, module in stubs.items() if saved[name] is None
                        or name in ("skimage", "skimage.metrics")})
    try:
        module = types.ModuleType("upstream_vlc_metrics")
        exec(compile(source.read_text(), str(source), "exec"), module.__dict__)
    finally:
        for name, module_before in saved.items():
            if module_before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module_before
    return module.compare_images


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snapshots")
    scene = Image.open(GOLD)
    out = {"gold": str(GOLD)}
    variants = {
        "same-rgba": scene.convert("RGBA"),
        "shifted": scene.transform(scene.size, Image.AFFINE, (1, 0, 3, 0, 1, 0)),
        "half": scene.resize((320, 240)),
        "title-card": Image.open(__import__("io").BytesIO(_first_scene_png())),
        "noisy": Image.fromarray(np.clip(np.array(scene, dtype=np.int16)
                                         + np.random.default_rng(3).integers(-20, 21, (480, 640, 3)), 0, 255)
                                 .astype(np.uint8)),
        "tiny": scene.resize((5, 4)),
    }
    for name, picture in variants.items():
        picture.save(folder / f"{name}.png")
        out[name] = str(folder / f"{name}.png")
    return out


def _first_scene_png() -> bytes:
    sys.path.insert(0, str(TASKS))
    try:
        from generators.video import _frame
    finally:
        sys.path.pop(0)
        for name in [n for n in sys.modules if n == "generators" or n.startswith("generators.")]:
            del sys.modules[name]
    import io

    buffer = io.BytesIO()
    _frame(False).save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_gold_is_the_generated_scene():
    assert GOLD.read_bytes() == load_generator("generators.video:scene_png", TASKS)()


@pytest.mark.parametrize("result", ["gold", "same-rgba", "shifted", "half", "title-card", "noisy"])
@pytest.mark.parametrize("options", [{}, {"reference_base_result": 0.5}])
def test_compare_images_matches_upstream(theirs, pictures, result, options):
    mine = ours.METRICS["compare_images"](pictures[result], pictures["gold"], **options)
    upstream = theirs(pictures[result], pictures["gold"], **options)
    assert mine == pytest.approx(float(upstream), abs=1e-9)


def test_the_same_pixels_score_exactly_one_and_others_less(pictures):
    compare = ours.METRICS["compare_images"]
    assert compare(pictures["gold"], pictures["gold"]) == 1.0
    assert compare(pictures["same-rgba"], pictures["gold"]) == 1.0
    for other in ("shifted", "title-card", "noisy"):
        assert compare(pictures[other], pictures["gold"]) < 0.99


def test_a_missing_unreadable_or_tiny_picture_scores_zero(pictures, tmp_path):
    compare = ours.METRICS["compare_images"]
    (tmp_path / "broken.png").write_bytes(b"not a png")
    assert compare(None, pictures["gold"]) == 0.0
    assert compare(str(tmp_path / "missing.png"), pictures["gold"]) == 0.0
    assert compare(str(tmp_path / "broken.png"), pictures["gold"]) == 0.0
    assert compare(pictures["tiny"], pictures["gold"]) == 0.0


def test_uniform_filter_matches_scipy():
    ndimage = pytest.importorskip("scipy.ndimage")
    values = np.random.default_rng(5).random((37, 53)) * 255
    assert np.allclose(ours._uniform_filter(values, 7), ndimage.uniform_filter(values, size=7), atol=1e-9)
