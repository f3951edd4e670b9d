"""tfc on Ray (pip install tfc[ray]; docs/serving.md, "Ray").

Online, Ray Serve: ``deployment(MODEL, ...)`` is a Serve application whose replicas
each hold one `tfc serve` backend (one model, one tfc.Engine) behind the same
OpenAI routes as `tfc serve`:

    from ray import serve
    import tfc.ray
    serve.run(tfc.ray.deployment("models/qwen", num_replicas=2,
                                 ray_actor_options={"num_cpus": 2}))

Offline, Ray Data: ``Embedder``, ``Translator`` and ``Generator`` are callable
classes for ``map_batches``; each actor loads its model once (a Hugging Face
directory through the compile cache of `tfc serve`, so the actors of one machine
compile it once between them):

    ds.map_batches(tfc.ray.Embedder, fn_constructor_kwargs={"model": "bge-small"},
                   concurrency=4, batch_size=256)
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

import numpy as np

from .serve._backend import Backend

__all__ = ["deployment", "Embedder", "Translator", "Generator"]


def deployment(model: str, *, name: str = "tfc", num_replicas: Optional[int] = None,
               autoscaling_config: Optional[Dict[str, Any]] = None,
               ray_actor_options: Optional[Dict[str, Any]] = None,
               api_key: Optional[str] = None, max_queue: int = 256, **backend_options: Any):
    """A bound Ray Serve application serving ``model`` with `tfc serve`'s routes.

    ``num_replicas`` or ``autoscaling_config`` (Ray Serve's), ``ray_actor_options``
    (e.g. ``{"num_cpus": 2}``: the replica's engine uses that many threads unless
    ``threads`` says otherwise); ``api_key`` and ``max_queue`` as `tfc serve`'s flags;
    the rest are tfc.serve.Backend's options (``tokenizer``, ``precision``,
    ``threads``, ``engine_options``, ``name`` for the served model id, ...)."""
    from ray import serve

    options: Dict[str, Any] = {"name": name}
    if autoscaling_config is not None:
        options["autoscaling_config"] = autoscaling_config
    elif num_replicas is not None:
        options["num_replicas"] = num_replicas
    if ray_actor_options is not None:
        options["ray_actor_options"] = ray_actor_options
    cpus = (ray_actor_options or {}).get("num_cpus")
    if cpus and "threads" not in backend_options:
        backend_options["threads"] = max(1, int(cpus))

    @serve.deployment(**options)
    @serve.ingress()
    class TfcServe:
        def __init__(self, model: str, api_key: Optional[str], max_queue: int,
                     backend_options: Dict[str, Any]) -> None:
            self.backend = Backend(model, **backend_options)
            self.api_key = api_key
            self.max_queue = max_queue

        def __serve_build_asgi_app__(self):
            from .serve import create_app
            return create_app(self.backend, api_key=self.api_key, max_queue=self.max_queue)

    return TfcServe.bind(os.fspath(model), api_key, max_queue, backend_options)


class _Batches:
    """A Ray Data callable over one column of texts (numpy batch format)."""

    def __init__(self, model: str, column: str, output: str, kwargs: Dict[str, Any]) -> None:
        self.backend = Backend(os.fspath(model), **kwargs)
        self.column = column
        self.output = output

    def texts(self, batch: Dict[str, np.ndarray]):
        if self.column not in batch:
            raise KeyError(f"the batch has no column {self.column!r} (its columns: "
                           f"{', '.join(batch)}); pass column=NAME")
        return [str(t) for t in batch[self.column]]


class Embedder(_Batches):
    """Sentence embeddings of ``column`` into ``output`` (float32 [batch, hidden],
    L2-normalized: tfc.Encoder.embed), for ``map_batches``."""

    def __init__(self, model: str, *, column: str = "text", output: str = "embedding",
                 **kwargs: Any) -> None:
        super().__init__(model, column, output, kwargs)
        if self.backend.kind != "embed":
            raise ValueError(f"Embedder takes an encoder; '{model}' is a "
                             f"{self.backend.kind} model")

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        out = dict(batch)
        out[self.output] = np.asarray(self.backend.embed(self.texts(batch)), dtype=np.float32)
        return out


class Translator(_Batches):
    """Translations of ``column`` into ``output`` (tfc.Translator.translate, through the
    actor's engine), for ``map_batches``. ``beam`` and ``max_len`` as translate's."""

    def __init__(self, model: str, *, column: str = "text", output: str = "translation",
                 beam: int = 4, max_len: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(model, column, output, kwargs)
        if self.backend.kind != "translate":
            raise ValueError(f"Translator takes an encoder-decoder; '{model}' is a "
                             f"{self.backend.kind} model")
        self.options = {"beam": beam, "max_len": max_len}

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        out = dict(batch)
        out[self.output] = np.asarray(self.backend.helper.translate(self.texts(batch),
                                                                    **self.options),
                                      dtype=object)
        return out


class Generator(_Batches):
    """Continuations of the prompts in ``column`` into ``output``
    (tfc.Generator.generate_text with ``return_full_text=False``, through the actor's
    engine), for ``map_batches``. The generation options are generate_text's."""

    def __init__(self, model: str, *, column: str = "prompt", output: str = "generated_text",
                 max_len: Optional[int] = None, sample: bool = False, temperature: float = 1.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, **kwargs: Any) -> None:
        super().__init__(model, column, output, kwargs)
        if self.backend.kind != "generate":
            raise ValueError(f"Generator takes a decoder-only model; '{model}' is a "
                             f"{self.backend.kind} model")
        self.options = dict(max_len=max_len, sample=sample, temperature=temperature,
                            top_k=top_k, top_p=top_p, seed=seed, return_full_text=False)

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        out = dict(batch)
        out[self.output] = np.asarray(self.backend.helper.generate_text(self.texts(batch),
                                                                        **self.options),
                                      dtype=object)
        return out
