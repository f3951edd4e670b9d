"""ctest python-ray: tfc.ray on a real multi-node Ray cluster on this machine.

The test starts a head and two worker nodes (ray.cluster_utils.Cluster: separate
raylets, as `ray start` makes them, on 127.0.0.1), runs on it, and tears it down:
  - Ray Data: a 10,000-sentence embedding job, ``map_batches(tfc.ray.Embedder, ...,
    concurrency=2)``, written to Parquet and read back, equal to tfc.Encoder in this
    process within 1e-6;
  - Ray Data's text-to-text classes: ``tfc.ray.Translator`` and ``tfc.ray.Generator``
    give what tfc.Translator and tfc.Generator give, row for row;
  - Ray Serve: ``tfc.ray.deployment`` with two replicas, both running, answering the
    official openai client with what tfc.Generator gives.
Every wait is bounded; all traffic stays on 127.0.0.1.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_test as st  # noqa: E402  (its Llama with a chat template)
import text_test as tt  # noqa: E402

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import tfc  # noqa: E402
import tfc.ray  # noqa: E402


class OnACluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.environ["TFC_CACHE_DIR"] = str(st.CACHE)
        # Each node: 1 CPU and a small object store (the machine has 2 cores).
        node = {"num_cpus": 1, "object_store_memory": 150 * 1024 * 1024,
                "include_dashboard": False}
        cls.cluster = Cluster(initialize_head=True, head_node_args=dict(node))
        for _ in range(2):
            cls.cluster.add_node(**{k: v for k, v in node.items() if k != "include_dashboard"})
        cls.cluster.wait_for_nodes(timeout=120)
        ray.init(address=cls.cluster.address, log_to_driver=False,
                 runtime_env={"env_vars": {"TFC_CACHE_DIR": str(st.CACHE),
                                           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
        alive = [n for n in ray.nodes() if n["Alive"]]
        assert len(alive) == 3, alive

    @classmethod
    def tearDownClass(cls):
        try:
            from ray import serve
            serve.shutdown()
        except Exception:
            pass
        ray.shutdown()
        cls.cluster.shutdown()

    def test_data_embeddings_to_parquet(self):
        d = tt.bert_dir()
        rng = np.random.default_rng(1)
        texts = [" ".join(rng.choice(tt.WORDS, size=rng.integers(2, 14))) for _ in range(10000)]
        out = Path(tempfile.mkdtemp(prefix="tfc-ray-parquet-"))
        try:
            ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
            ds = ds.map_batches(tfc.ray.Embedder, fn_constructor_kwargs={"model": str(d),
                                                                        "threads": 1},
                                concurrency=2, batch_size=500, num_cpus=1)
            ds.write_parquet(str(out))
            import pyarrow.parquet as pq

            table = pq.read_table(str(out))
            ids = np.asarray(table.column("id").to_pylist())
            got = np.stack([np.asarray(e, dtype=np.float32)
                            for e in table.column("embedding").to_pylist()])
            self.assertEqual(sorted(ids.tolist()), list(range(len(texts))))
            want = tfc.Encoder(d, threads=1).embed(texts)
            np.testing.assert_allclose(got, want[ids], atol=1e-6)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_data_translator_and_generator(self):
        """The text-to-text classes: each row's output equals the helper's, in order."""
        d, _, _ = tt.marian()
        texts = [t for t in tt.CORPUS[:24]]
        ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
        rows = ds.map_batches(tfc.ray.Translator,
                              fn_constructor_kwargs={"model": str(d), "beam": 2, "max_len": 12,
                                                     "threads": 1},
                              concurrency=1, batch_size=8, num_cpus=1).take_all()
        got = {r["id"]: r["translation"] for r in rows}
        want = tfc.Translator(d, threads=1).translate(texts, beam=2, max_len=12)
        self.assertEqual([got[i] for i in range(len(texts))], want)
        g = st.llama_dir()
        prompts = texts[:12]
        rows = ray.data.from_items([{"id": i, "prompt": t} for i, t in enumerate(prompts)]) \
            .map_batches(tfc.ray.Generator, fn_constructor_kwargs={"model": str(g), "max_len": 8,
                                                                  "threads": 1},
                         concurrency=1, batch_size=6, num_cpus=1).take_all()
        got = {r["id"]: r["generated_text"] for r in rows}
        want = tfc.Generator(g, threads=1).generate_text(prompts, max_len=8,
                                                         return_full_text=False)
        self.assertEqual([got[i] for i in range(len(prompts))], want)

    def test_serve_two_replicas_answer_openai(self):
        from ray import serve

        d = st.llama_dir()
        port = st.free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port},
                    proxy_location="HeadOnly")
        serve.run(tfc.ray.deployment(str(d), num_replicas=2,
                                     ray_actor_options={"num_cpus": 1}, name="tfc-llama"),
                  name="tfc", route_prefix="/")
        deadline = time.time() + 180
        while time.time() < deadline:
            status = serve.status().applications["tfc"]
            replicas = status.deployments["tfc-llama"].replica_states
            if status.status == "RUNNING" and replicas.get("RUNNING", 0) == 2:
                break
            time.sleep(0.5)
        self.assertEqual(replicas.get("RUNNING", 0), 2, replicas)
        import openai

        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none",
                               max_retries=0, timeout=120)
        want = tfc.Generator(d, threads=1).chat(st.MESSAGES, max_len=10)
        for _ in range(6):
            got = client.chat.completions.create(model="llama-chat", messages=st.MESSAGES,
                                                 max_tokens=10, temperature=0)
            self.assertEqual(got.choices[0].message.content, want)
        streamed = "".join(c.choices[0].delta.content or "" for c in
                           client.chat.completions.create(model="llama-chat",
                                                          messages=st.MESSAGES, max_tokens=10,
                                                          temperature=0, stream=True)
                           if c.choices)
        self.assertEqual(streamed, want)
        serve.delete("tfc")


if __name__ == "__main__":
    unittest.main(verbosity=2)
