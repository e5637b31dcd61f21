"""torchvision.transforms: InterpolationMode (transformers' image_utils binds it), the rest raises."""

from enum import Enum

from .._stub import stub_getattr


class InterpolationMode(Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


__getattr__ = stub_getattr(__name__)
