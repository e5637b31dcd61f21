"""Family layouts built from a published config must be what transformers itself writes.

GLM-OCR and EXAONE 4.5 ship their non-MTP weights under the names and shapes of
transformers' own model classes (`save_pretrained` of GlmOcrForConditionalGeneration /
Exaone4_5_ForConditionalGeneration); their MTP blocks are not transformers modules at all
(transformers drops them on load), so the fixture's MTP tensors are exactly the rest.
Built on the meta device from the fixture's config.json: no weight data."""

from __future__ import annotations

import pytest

from fixtures import layouts

CASES = {
    # family: (transformers class name, prefix every MTP tensor starts with)
    "glm_ocr": ("GlmOcrForConditionalGeneration", "model.language_model.layers.16."),
    "exaone4_5": ("Exaone4_5_ForConditionalGeneration", "mtp."),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_non_mtp_layout_is_what_transformers_writes(family):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cls_name, mtp_prefix = CASES[family]
    config = transformers.AutoConfig.from_pretrained(layouts.FAMILIES_DIR / family)
    with torch.device("meta"):
        model = getattr(transformers, cls_name)(config)
    written = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    ours = {name: tuple(shape) for name, _, shape in layouts.official_layout(family)}
    trunk = {n: s for n, s in ours.items() if not n.startswith(mtp_prefix)}
    assert trunk == written
    mtp = set(ours) - set(trunk)
    assert mtp and not any(n.startswith(mtp_prefix) for n in written)
