"""mtplint: will this checkpoint load and draft correctly with MTP on this vLLM?"""

__version__ = "0.1.0"
