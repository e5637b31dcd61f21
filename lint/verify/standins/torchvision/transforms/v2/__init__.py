"""torchvision.transforms.v2: every name raises when used."""

from ..._stub import stub_getattr
from .. import InterpolationMode  # noqa: F401

__getattr__ = stub_getattr(__name__)
