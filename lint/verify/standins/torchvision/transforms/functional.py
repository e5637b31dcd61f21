"""torchvision.transforms.functional: every name raises when used."""

from .._stub import stub_getattr

__getattr__ = stub_getattr(__name__)
