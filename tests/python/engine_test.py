"""ctest python-engine: tfc.Engine (continuous batching) from Python, in the venv of
tests/python/install.sh, run from outside the source tree.

Every request's result equals Session.generate of the same inputs and options, for
requests submitted together from several threads, awaited from asyncio and
streamed, and through a KV pool so small that requests are preempted and
recomputed; cancellation raises tfc.Cancelled, a full queue tfc.Busy, and the KV
blocks all return to the pool.
Usage: python engine_test.py   (TFC_SOURCE_DIR names the source tree, for its models)
"""
from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
import unittest
from pathlib import Path

import numpy as np

import tfc

ROOT = Path(os.environ["TFC_SOURCE_DIR"])
MODELS = ROOT / "models"

GPT2_SMALL = {"d_model": 32, "heads": 4, "d_ff": 64, "layers": 2, "max_len": 48, "vocab": 50,
              "max_batch": 16, "bos_id": 1, "eos_id": 2}
FLOYDHUB_SMALL = {"d_model": 32, "heads": 4, "d_ff": 64, "layers": 2, "max_len": 24,
                  "max_batch": 16, "src_vocab": 40, "tgt_vocab": 40}


def prompts(n: int, seed: int, vocab: int, lo: int = 1, hi: int = 20):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab, size=(1, int(rng.integers(lo, hi + 1)))).astype(np.int64)
            for _ in range(n)]


class EngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gpt2 = tfc.compile(MODELS / "gpt2.yaml", set=GPT2_SMALL)
        cls.floydhub = tfc.compile(MODELS / "tutorial-floydhub.yaml", set=FLOYDHUB_SMALL)
        cls.session = cls.gpt2.session(threads=1)

    def assertSameGenerations(self, got, want, what=""):
        """Equal tokens and scores within 1e-5: a request's rows share GEMMs with
        other rows, and the product does not promise bitwise equality across batch
        sizes (docs/precision.md)."""
        self.assertEqual([g.ids for g in got], [g.ids for g in want], what)
        for a, b in zip(got, want):
            self.assertAlmostEqual(a.score, b.score, delta=1e-5, msg=what)

    def options(self, i: int) -> dict:
        return [dict(max_len=9), dict(max_len=7, beam=3, length_penalty=0.8),
                dict(max_len=8, sample=True, top_k=10, seed=40 + i)][i % 3]

    def test_requests_from_threads_equal_a_session(self):
        ps = prompts(18, 1, 50)
        want = [self.session.generate({"tokens": p}, **self.options(i)) for i, p in enumerate(ps)]
        engine = tfc.Engine(self.gpt2, threads=2, max_rows=8)
        got = [None] * len(ps)

        def work(t):
            for i in range(t, len(ps), 3):
                got[i] = engine.submit({"tokens": ps[i]}, **self.options(i)).result(timeout=60)

        pool = [threading.Thread(target=work, args=(t,)) for t in range(3)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        for i in range(len(ps)):
            self.assertSameGenerations(got[i], want[i], f"request {i}")
        st = engine.stats()
        self.assertEqual(st["requests_finished"], len(ps))
        # max_rows 8 (the default pool: every row at max_len 48, blocks of 16).
        self.assertEqual((st["kv_blocks_used"], st["kv_blocks_free"]), (0, 8 * 3))

    def test_translation_requests_equal_a_session(self):
        session = self.floydhub.session(threads=1)
        srcs = prompts(8, 2, 40, 2, 15)
        want = [session.generate({"src": s}, beam=1 + i % 2, max_len=8) for i, s in enumerate(srcs)]
        engine = tfc.Engine(self.floydhub, threads=2)
        reqs = [engine.submit({"src": s}, beam=1 + i % 2, max_len=8) for i, s in enumerate(srcs)]
        for i, r in enumerate(reqs):
            # Rows of other source lengths share the batch (padded memory).
            self.assertSameGenerations(r.result(timeout=60), want[i], f"request {i}")
        # The encoder memory went back to its pool: blocks of 16 source positions,
        # each every layer's cross-attention K and V (16 x 2 layers x 2 x 32 f32: 8 KiB).
        st = engine.stats()
        self.assertEqual((st["memory_block_positions"], st["memory_block_bytes"]), (16, 8192))
        self.assertEqual(st["memory_blocks_used"], 0)
        self.assertEqual(tfc.Engine(self.gpt2).stats()["memory_block_positions"], 0)

    def test_asyncio_generate_and_stream(self):
        p = prompts(1, 3, 50)[0]
        want = self.session.generate({"tokens": p}, max_len=12)
        engine = tfc.Engine(self.gpt2, threads=2)

        async def main():
            gens = await asyncio.gather(*[engine.generate({"tokens": p}, max_len=12)
                                          for _ in range(4)])
            steps = [s.token_id async for s in engine.stream({"tokens": p}, max_len=12)]
            return gens, steps

        gens, steps = asyncio.run(main())
        for g in gens:
            self.assertSameGenerations(g, want)
        self.assertEqual(steps, want[0].ids)
        # Iterating a request yields the same tokens.
        self.assertEqual([s.token_id for s in engine.submit({"tokens": p}, max_len=12)],
                         want[0].ids)

    def test_cancel_busy_and_bad_requests(self):
        p = prompts(1, 4, 50, 5, 5)[0]
        engine = tfc.Engine(self.gpt2, threads=2, max_rows=1, max_queue=1)
        # The running request's token callback holds its search at its first token
        # until the test has cancelled it: otherwise its 40 tokens can all be done
        # before the cancel (a few milliseconds on a fast machine), and the test
        # would race the engine. (Request internals: the public submit takes no
        # callback.)
        hold = threading.Event()
        steps: "queue.Queue" = queue.Queue()

        def held(step):
            steps.put(step)
            hold.wait(60)

        running = engine._submit({"tokens": p}, held, tfc.Request, steps, max_len=40)
        # The queue holds one request: wait (bounded) until the engine has taken the
        # first into its row, or the second submit would find the queue full already.
        deadline = time.time() + 30
        while engine.stats()["requests_queued"] > 0 and time.time() < deadline:
            time.sleep(0.001)
        self.assertEqual(engine.stats()["requests_queued"], 0)
        queued = engine.submit({"tokens": p}, max_len=40)
        with self.assertRaises(tfc.Busy) as cm:
            engine.submit({"tokens": p}, max_len=40)
        self.assertEqual(str(cm.exception),
                         "the engine's queue is full (1 requests waiting); try again later")
        queued.cancel()
        with self.assertRaises(tfc.Cancelled) as cm:
            queued.result(timeout=60)
        self.assertEqual(str(cm.exception), f"request {queued.id} was cancelled")
        running.cancel()
        hold.set()
        with self.assertRaises(tfc.Cancelled):
            running.result(timeout=60)
        with self.assertRaises(tfc.InvalidArgument) as cm:
            engine.submit({"nope": p})
        self.assertEqual(str(cm.exception), "unknown input 'nope' (inputs: tokens)")
        with self.assertRaises(tfc.InvalidArgument) as cm:
            engine.submit({"tokens": p}, beam=2)
        self.assertEqual(str(cm.exception), "the request needs 2 rows (batch 1 x beam width 2), "
                                            "more than the engine's 1")
        with self.assertRaises(tfc.InvalidArgument):
            tfc.Engine(self.gpt2, kv_cache_mb=0.001)
        st = engine.stats()
        self.assertEqual((st["kv_blocks_used"], st["kv_blocks_free"]), (0, 3))
        self.assertEqual(st["requests_cancelled"], 2)

    def test_prefix_caching(self):
        # Prompts that start with the same 32 tokens: the later ones start from
        # the first one's KV blocks, and each result equals a session's.
        rng = np.random.default_rng(8)
        head = rng.integers(3, 50, size=32)
        ps = [np.concatenate([head, rng.integers(3, 50, size=int(n))])[None].astype(np.int64)
              for n in (3, 1, 5, 2)]
        for on in (True, False):
            engine = tfc.Engine(self.gpt2, threads=2, prefix_caching=on)
            for i, p in enumerate(ps):
                req = engine.submit({"tokens": p}, **self.options(i))
                got = req.result(timeout=60)
                self.assertEqual(req.cached_tokens, 32 if on and i else 0)
                self.assertSameGenerations(
                    got, self.session.generate({"tokens": p}, **self.options(i)),
                    f"prompt {i}, prefix_caching={on}")
            st = engine.stats()
            if on:
                self.assertEqual(st["prefix_cache_queries"], sum(p.size for p in ps))
                self.assertEqual(st["prefix_cache_hits"], 32 * (len(ps) - 1))
                self.assertGreater(st["kv_blocks_cached"], 0)
            else:
                self.assertEqual((st["prefix_cache_queries"], st["prefix_cache_hits"],
                                  st["kv_blocks_cached"]), (0, 0, 0))
            self.assertEqual(st["kv_blocks_used"], 0)
        # A salted request shares blocks with requests of its salt only.
        engine = tfc.Engine(self.gpt2, threads=2)
        engine.submit({"tokens": ps[0]}, max_len=4).result(timeout=60)
        for want in (0, 32):
            req = engine.submit({"tokens": ps[1]}, max_len=4, cache_salt="tenant-a")
            req.result(timeout=60)
            self.assertEqual(req.cached_tokens, want)
        with self.assertRaises(tfc.InvalidArgument) as cm:
            engine.submit({"tokens": ps[1]}, cache_salt="")
        self.assertEqual(str(cm.exception), "cache_salt must be a non-empty string or None, "
                                            "got ''")
        with self.assertRaises(tfc.InvalidArgument) as cm:
            tfc.Engine(self.gpt2, prefix_caching=1)
        self.assertEqual(str(cm.exception), "prefix_caching must be True or False, got 1")

    def test_kv_cache_mb_sizes_the_pool(self):
        # One block: 2 layers x (K + V) x 16 positions x 32 floats = 8 KiB.
        st = tfc.Engine(self.gpt2, kv_cache_mb=0.1).stats()
        self.assertEqual((st["kv_block_positions"], st["kv_block_bytes"]), (16, 8192))
        self.assertEqual(st["kv_blocks_free"], 12)
        with self.assertRaises(tfc.InvalidArgument) as cm:
            tfc.Engine(self.gpt2, kv_block_size=100)
        self.assertEqual(str(cm.exception),
                         "a KV block of 100 positions is outside 1 .. max_len 48")

    def test_the_default_pool_is_at_most_1_gib(self):
        # max_len 262144: every row at max_len would take 2 GiB (16 rows x 16384
        # blocks of 8 KiB); the default pool stops at 1 GiB, and a request still runs.
        long = tfc.compile(MODELS / "gpt2.yaml", set=dict(GPT2_SMALL, max_len=262144))
        engine = tfc.Engine(long, threads=2)
        st = engine.stats()
        self.assertEqual(st["kv_block_bytes"], 8192)
        self.assertEqual(st["kv_blocks_free"], (1 << 30) // 8192)
        p = prompts(1, 5, 50)[0]
        want = long.session(threads=1).generate({"tokens": p}, max_len=6)
        self.assertSameGenerations(engine.submit({"tokens": p}, max_len=6).result(timeout=60),
                                   want)

    def test_a_small_pool_preempts_and_recomputes(self):
        # 14 blocks of 4 positions (2 KiB each) for 8 rows of up to 22 positions
        # (6 blocks; a beam-2 request takes 12 at most): any two long requests
        # outgrow the pool, whatever the timing of the submits, and the most
        # recently admitted requests are preempted and recomputed. Results stay
        # those of a session.
        ps = prompts(16, 4, 50, 1, 10)
        opts = [dict(max_len=12), dict(max_len=12, beam=2)]
        want = [self.session.generate({"tokens": p}, **opts[i % 2]) for i, p in enumerate(ps)]
        engine = tfc.Engine(self.gpt2, threads=2, max_rows=8, kv_block_size=4,
                            kv_cache_mb=14 * 2048 / (1 << 20))
        reqs = [engine.submit({"tokens": p}, **opts[i % 2]) for i, p in enumerate(ps)]
        for i, r in enumerate(reqs):
            self.assertSameGenerations(r.result(timeout=60), want[i], f"request {i}")
        st = engine.stats()
        self.assertGreater(st["requests_preempted"], 0)
        self.assertEqual((st["kv_blocks_used"], st["kv_blocks_free"]), (0, 14))


if __name__ == "__main__":
    unittest.main(verbosity=2)
