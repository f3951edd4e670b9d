"""ctest python-serve: `tfc serve` (docs/serving.md) as users reach it, with the
official `openai` client from PyPI, on random-weight Hugging Face models built here
(text_test.py's builders): a Llama with a chat template, a BERT encoder, a Marian
encoder-decoder. Every server runs as its own process on 127.0.0.1, started as users
start it (`tfc serve`), and stopped with SIGTERM, which must exit 0.

  - chat (whole and streamed), completions (text and token-id prompts, stop strings,
    n, seeded sampling, logprobs), embeddings (float and base64) and models equal
    tfc.Generator, tfc.Translator and tfc.Encoder run in this process;
  - bad requests: each gets its status, OpenAI's error shape and the field, and the
    server stays up; a bad or missing API key is 401 everywhere but /health;
  - overload: more concurrent requests than the queue holds get 429 with Retry-After,
    and every accepted one completes;
  - disconnects: 20 clients that leave mid-stream cancel their requests, and the
    metrics show every KV block back in the pool.
Every loop is bounded in count and time; all traffic goes to 127.0.0.1.
"""
from __future__ import annotations

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import text_test as tt  # noqa: E402  (the models and tokenizers of python-text)

import openai  # noqa: E402
import tfc  # noqa: E402

KEY = "sk-tfc-test"
CACHE = Path(tempfile.mkdtemp(prefix="tfc-serve-cache-"))
atexit.register(shutil.rmtree, CACHE, True)
MESSAGES = [{"role": "system", "content": "the teacher reads"},
            {"role": "user", "content": "the cat sleeps under the tree"}]


def llama_dir(name: str = "llama-chat", hidden: int = 32, layers: int = 2,
              positions: int = 128) -> Path:
    """A Llama (GQA, tied embeddings) with a ChatML template and eos <|im_end|>."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    d = tt.WORK / name
    if (d / "config.json").exists():
        return d
    tok = tt.bpe_tokenizer(d, ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], eos="<|im_end|>")
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                         "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}"
                         "<|im_start|>assistant\n{% endif %}")
    tok.save_pretrained(d)
    torch.manual_seed(3)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=positions, bos_token_id=eos, eos_token_id=eos,
                      tie_word_embeddings=True)
    tt.perturb(LlamaForCausalLM(cfg).eval()).save_pretrained(d)
    return d


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tfc_command() -> list:
    """`tfc` as `pip install` puts it on PATH (the package's console script, beside the
    --target install python-text-install made), else `python -m tfc.serve`'s module."""
    site = os.environ.get("TFC_TEXT_SITE")
    script = Path(site) / "bin" / "tfc" if site else None
    if script is not None and script.exists():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "tfc._cli"]


class Server:
    """One `tfc serve` process on a free loopback port."""

    def __init__(self, model: Path, *args: str, key: str | None = None,
                 cache: Path = CACHE) -> None:
        self.port = free_port()
        self.key = key
        env = dict(os.environ, TFC_CACHE_DIR=str(cache))
        if key:
            env["TFC_API_KEY"] = key
        self.log = tempfile.NamedTemporaryFile(prefix="tfc-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(tfc_command() + ["serve", str(model), "--port",
                                                      str(self.port), "--threads", "1",
                                                      "--log-level", "warning", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"tfc serve exited {self.proc.returncode}:\n{self.logs()}")
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.proc.kill()
        raise AssertionError(f"tfc serve did not answer /health in 180 s:\n{self.logs()}")

    def logs(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def request(self, method: str, path: str, body=None, headers=None, timeout=60):
        """(status, headers, parsed JSON or text) of one request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = f"Bearer {self.key}"
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            raw = r.read().decode()
            try:
                data = json.loads(raw)
            except ValueError:
                data = raw
            return r.status, dict(r.getheaders()), data
        finally:
            conn.close()

    def metric(self, name: str, labels: str = "") -> float:
        text = self.request("GET", "/metrics")[2]
        m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def client(self) -> "openai.OpenAI":
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1",
                             api_key=self.key or "none", max_retries=0, timeout=120)

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"tfc serve ignored SIGTERM for {timeout} s")
        os.unlink(self.log.name)
        return self.proc.returncode


class Chat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = llama_dir()
        cls.server = Server(cls.dir, "--served-model-name", "tiny-llama", key=KEY)
        cls.client = cls.server.client()
        cls.gen = tfc.Generator(cls.dir, threads=1)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "tfc serve did not exit 0 on SIGTERM"

    def test_models(self):
        self.assertEqual([m.id for m in self.client.models.list().data], ["tiny-llama"])
        self.assertEqual(self.client.models.retrieve("tiny-llama").id, "tiny-llama")
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("gpt-4")
        # The compile cache holds the model, compiled once.
        self.assertEqual(len(list(CACHE.glob("llama-chat-f32-*.bin"))), 1)

    def test_chat_template_equals_transformers(self):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(self.dir)
        for msgs in (MESSAGES, MESSAGES + [{"role": "assistant", "content": "a dog runs"},
                                           {"role": "user", "content": "and then?"}]):
            text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            self.assertEqual(self.gen.chat_template.render(msgs), text)
            self.assertEqual(self.gen.chat_ids(msgs),
                             tok(text, add_special_tokens=False)["input_ids"])

    def test_chat_equals_generator(self):
        want = self.gen.chat(MESSAGES, max_len=12)
        got = self.client.chat.completions.create(model="tiny-llama", messages=MESSAGES,
                                                  max_tokens=12, temperature=0)
        self.assertEqual(got.choices[0].message.content, want)
        self.assertEqual(got.choices[0].message.role, "assistant")
        self.assertEqual(got.usage.prompt_tokens, len(self.gen.chat_ids(MESSAGES)))
        self.assertEqual(got.usage.total_tokens, got.usage.prompt_tokens
                         + got.usage.completion_tokens)
        self.assertIn(got.choices[0].finish_reason, ("stop", "length"))

    def test_chat_stream(self):
        want = self.gen.chat(MESSAGES, max_len=12)
        stream = self.client.chat.completions.create(model="tiny-llama", messages=MESSAGES,
                                                     max_tokens=12, temperature=0, stream=True,
                                                     stream_options={"include_usage": True})
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, want)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual(chunks[-1].choices, [])  # include_usage: the usage chunk last
        self.assertEqual(chunks[-1].usage.prompt_tokens, len(self.gen.chat_ids(MESSAGES)))
        finished = [c.choices[0].finish_reason for c in chunks if c.choices
                    and c.choices[0].finish_reason]
        self.assertEqual(len(finished), 1)

    def test_a_shared_system_prompt_is_prefilled_once(self):
        # Prefix caching: the second conversation starts from the KV blocks of
        # the first one's system prompt; its answer is still the Generator's.
        system = {"role": "system", "content": " ".join(["the teacher reads the book"] * 2)}
        before = self.server.metric("tfc_prefix_cache_hits_total")
        cached = []
        for user in ("the cat sleeps under the tree", "a big red dog runs"):
            msgs = [system, {"role": "user", "content": user}]
            got = self.client.chat.completions.create(model="tiny-llama", messages=msgs,
                                                      max_tokens=8, temperature=0)
            self.assertEqual(got.choices[0].message.content, self.gen.chat(msgs, max_len=8))
            cached.append(got.usage.prompt_tokens_details.cached_tokens)
        # The second reused whole blocks of 16 of the system prompt (the first may
        # have found the template's head from other tests).
        self.assertGreaterEqual(cached[1], 32)
        self.assertEqual(cached[1] % 16, 0)
        self.assertLess(cached[1], got.usage.prompt_tokens)
        # vLLM's cache_salt: a salted request shares blocks with its salt only.
        salted = []
        for _ in range(2):
            got = self.client.chat.completions.create(
                model="tiny-llama", messages=msgs, max_tokens=8, temperature=0,
                extra_body={"cache_salt": "tenant-b"})
            self.assertEqual(got.choices[0].message.content, self.gen.chat(msgs, max_len=8))
            salted.append(got.usage.prompt_tokens_details.cached_tokens)
        self.assertEqual(salted[0], 0)
        self.assertGreaterEqual(salted[1], 32)
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.chat.completions.create(model="tiny-llama", messages=msgs,
                                                max_tokens=8, extra_body={"cache_salt": 5})
        self.assertEqual(cm.exception.body["message"],
                         "'cache_salt' must be a non-empty string, got 5")
        self.assertGreaterEqual(len(self.gen.chat_ids([system])), 32)
        self.assertGreaterEqual(self.server.metric("tfc_prefix_cache_hits_total") - before, 32)
        self.assertGreater(self.server.metric("tfc_prefix_cache_queries_total"), 0)

    def test_completions_equal_generate_text(self):
        prompts = ["the cat", "a big red dog runs"]
        want = self.gen.generate_text(prompts, max_len=10, return_full_text=False)
        got = self.client.completions.create(model="tiny-llama", prompt=prompts, max_tokens=10,
                                             temperature=0)
        self.assertEqual([c.text for c in sorted(got.choices, key=lambda c: c.index)], want)
        ids = self.gen.tokenizer.encode(prompts)
        self.assertEqual(got.usage.prompt_tokens, sum(len(i) for i, _ in ids))
        # A prompt of token ids is the same prompt.
        by_ids = self.client.completions.create(model="tiny-llama", prompt=ids[0][0],
                                                max_tokens=10, temperature=0)
        self.assertEqual(by_ids.choices[0].text, want[0])

    def test_stop_strings_cut_and_stream(self):
        full = self.gen.generate_text("the cat", max_len=20, return_full_text=False)
        self.assertGreater(len(full.strip()), 4, full)
        stop = full.strip()[2:4]
        want = full[:full.find(stop)]
        got = self.client.completions.create(model="tiny-llama", prompt="the cat",
                                             max_tokens=20, temperature=0, stop=[stop])
        self.assertEqual(got.choices[0].text, want)
        self.assertEqual(got.choices[0].finish_reason, "stop")
        streamed = "".join(c.choices[0].text for c in self.client.completions.create(
            model="tiny-llama", prompt="the cat", max_tokens=20, temperature=0, stop=stop,
            stream=True) if c.choices)
        self.assertEqual(streamed, want)

    def test_seeded_sampling_and_n(self):
        got = self.client.completions.create(model="tiny-llama", prompt="the cat",
                                             max_tokens=8, temperature=0.9, seed=7, n=2,
                                             extra_body={"top_k": 20})
        texts = [c.text for c in sorted(got.choices, key=lambda c: c.index)]
        want = [self.gen.generate_text("the cat", max_len=8, sample=True, temperature=0.9,
                                       top_k=20, seed=s, return_full_text=False)
                for s in (7, 8)]
        self.assertEqual(texts, want)
        again = self.client.completions.create(model="tiny-llama", prompt="the cat",
                                               max_tokens=8, temperature=0.9, seed=7,
                                               extra_body={"top_k": 20})
        self.assertEqual(again.choices[0].text, want[0])

    def test_repetition_penalty_and_min_p(self):
        want = self.gen.generate_text("the cat", max_len=12, return_full_text=False,
                                      repetition_penalty=1.5)
        got = self.client.completions.create(model="tiny-llama", prompt="the cat", max_tokens=12,
                                             temperature=0,
                                             extra_body={"repetition_penalty": 1.5})
        self.assertEqual(got.choices[0].text, want)
        want = self.gen.generate_text("the cat", max_len=8, sample=True, temperature=0.9,
                                      min_p=0.2, seed=3, return_full_text=False)
        got = self.client.completions.create(model="tiny-llama", prompt="the cat", max_tokens=8,
                                             temperature=0.9, seed=3, extra_body={"min_p": 0.2})
        self.assertEqual(got.choices[0].text, want)
        code, _, data = self.server.request("POST", "/v1/completions", {
            "model": "tiny-llama", "prompt": "x", "repetition_penalty": 1.2, "beam": 2})
        self.assertEqual((code, data["error"]["param"]), (400, "repetition_penalty"))

    def test_logprobs_sum_to_the_score(self):
        got = self.client.chat.completions.create(model="tiny-llama", messages=MESSAGES,
                                                  max_tokens=6, temperature=0, logprobs=True)
        content = got.choices[0].logprobs.content
        self.assertEqual(len(content), got.usage.completion_tokens)
        ids = np.asarray([self.gen.chat_ids(MESSAGES)])
        g = self.gen.session.generate({self.gen.model.inputs[0].name: ids}, max_len=6)[0]
        self.assertAlmostEqual(sum(t.logprob for t in content), g.score, places=4)

    def test_bad_requests(self):
        s = self.server
        base = {"model": "tiny-llama", "prompt": "the cat", "max_tokens": 4}
        cases = [
            (b"{not json", 400, None, "the request body is not valid JSON"),
            (b"[1, 2]", 400, None, "the request body must be a JSON object"),
            (b'{"prompt": ' + b"[" * 100000 + b"]" * 100000 + b"}", 400, None,
             "the request body is not valid JSON: it nests arrays or objects too deeply"),
            (b'{"model": "tiny-llama", "prompt": "the \\ud800 cat"}', 400, "prompt",
             "'prompt' holds a lone UTF-16 surrogate"),
            (b'{"model": "tiny-llama", "prompt": "a", "stop": ["x", "\\udfff"]}', 400, "stop",
             "'stop[1]' holds a lone UTF-16 surrogate"),
            (b'{"model": "tiny-llama", "prompt": "a", "\\ud800": 1}', 400, None,
             "a key of the request body holds a lone UTF-16 surrogate"),
            ({**base, "max_tokens": "4"}, 400, "max_tokens", "'max_tokens' must be an integer"),
            ({**base, "temperature": -1}, 400, "temperature",
             "'temperature' must be a number from 0 to 2, got -1"),
            ({**base, "n": 0}, 400, "n", "'n' must be an integer from 1 to 16, got 0"),
            ({**base, "frobnicate": True}, 400, "frobnicate",
             "Unrecognized request argument supplied: frobnicate"),
            ({**base, "prompt": ""}, 400, "prompt", "prompt 0 is empty"),
            ({**base, "prompt": 5}, 400, "prompt", "'prompt' must be a string"),
            ({**base, "max_tokens": 10 ** 6}, 400, "max_tokens",
             "This model's maximum context length is 128 tokens. However, you requested"),
            ({**base, "prompt": "the cat " * 200}, 400, "prompt",
             "This model's maximum context length is 128 tokens. However, your prompt has"),
            ({**base, "stop": [1]}, 400, "stop", "'stop' must be"),
            ({**base, "model": "gpt-4"}, 404, "model", "The model 'gpt-4' does not exist"),
            ({**base, "presence_penalty": 1.5}, 400, "presence_penalty",
             "'presence_penalty' is not supported"),
        ]
        for body, status, param, message in cases:
            with self.subTest(body=str(body)[:60]):
                code, _, data = s.request("POST", "/v1/completions", body)
                self.assertEqual(code, status, data)
                self.assertEqual(data["error"]["param"], param)
                self.assertIn(message, data["error"]["message"])
                self.assertEqual(set(data["error"]), {"message", "type", "param", "code"})
        code, _, data = s.request("POST", "/v1/chat/completions",
                                  {"model": "tiny-llama", "messages": [{"role": "robot",
                                                                        "content": "hi"}]})
        self.assertEqual((code, data["error"]["param"]), (400, "messages"))
        self.assertIn("'messages[0].role' must be one of", data["error"]["message"])
        code, _, data = s.request("POST", "/v1/embeddings", {"model": "tiny-llama",
                                                             "input": "x"})
        self.assertEqual(code, 400)
        self.assertIn("it serves /v1/completions and /v1/chat/completions", data["error"]["message"])
        code, _, data = s.request("GET", "/v1/nowhere")
        self.assertEqual((code, data["error"]["message"]), (404, "no route GET /v1/nowhere"))
        self.assertEqual(s.request("GET", "/health")[0], 200)  # still up
        self.assertGreaterEqual(s.metric("tfc_requests_total",
                                         '{route="/v1/completions",status="400"}'), 12)

    def test_max_model_len_compiles_the_context(self):
        """--max-model-len N compiles the directory for N positions (its config says
        128): /v1/models reports it and a longer request is refused naming it; with a
        model.bin it is an error at start."""
        cache = Path(tempfile.mkdtemp(prefix="tfc-serve-cache-48-"))
        self.addCleanup(shutil.rmtree, cache, True)
        server = Server(self.dir, "--served-model-name", "short", "--max-model-len", "48",
                        cache=cache)
        try:
            code, _, data = server.request("GET", "/v1/models")
            self.assertEqual((code, data["data"][0]["max_model_len"]), (200, 48))
            code, _, data = server.request("POST", "/v1/completions",
                                           {"model": "short", "prompt": "the cat",
                                            "max_tokens": 60})
            self.assertEqual((code, data["error"]["param"]), (400, "max_tokens"))
            self.assertIn("This model's maximum context length is 48 tokens",
                          data["error"]["message"])
            code, _, data = server.request("POST", "/v1/completions",
                                           {"model": "short", "prompt": "the cat",
                                            "max_tokens": 4})
            self.assertEqual(code, 200, data)
        finally:
            self.assertEqual(server.stop(), 0)
        binp = tt.WORK / "llama-chat-f32.bin"
        tfc.compile(self.dir).save(binp)
        r = subprocess.run(tfc_command() + ["serve", str(binp), "--tokenizer", str(self.dir),
                                            "--max-model-len", "48"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--max-model-len sets the context a directory is compiled for", r.stderr)

    def test_api_key(self):
        s = self.server
        for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}):
            code, _, data = s.request("GET", "/v1/models", headers=headers)
            self.assertEqual(code, 401)
            self.assertEqual(data["error"]["type"], "authentication_error")
        code, _, _ = s.request("GET", "/health", headers={"Authorization": ""})
        self.assertEqual(code, 200)
        bad = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="wrong",
                            max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()


class Encoders(unittest.TestCase):
    def test_embeddings_equal_encoder(self):
        d = tt.bert_dir()
        server = Server(d)
        try:
            client = server.client()
            texts = ["the cat sleeps.", "a big red dog runs quickly", "night"]
            want = tfc.Encoder(d, threads=1).embed(texts)
            got = client.embeddings.create(model="bert", input=texts)  # base64 by default
            e = np.asarray([x.embedding for x in sorted(got.data, key=lambda x: x.index)])
            np.testing.assert_allclose(e, want, atol=1e-6)
            floats = server.request("POST", "/v1/embeddings",
                                    {"model": "bert", "input": texts[0],
                                     "encoding_format": "float"})[2]
            np.testing.assert_allclose(floats["data"][0]["embedding"], want[0], atol=1e-6)
            self.assertGreater(floats["usage"]["prompt_tokens"], 0)
            # A model.bin with --tokenizer DIR serves the same vectors.
            binp = tt.WORK / "bert-serve.bin"
            tfc.compile(d).save(binp)
            from_bin = Server(binp, "--tokenizer", str(d))
            try:
                e2 = from_bin.client().embeddings.create(model="bert-serve", input=texts)
                np.testing.assert_allclose(
                    np.asarray([x.embedding for x in sorted(e2.data, key=lambda x: x.index)]),
                    want, atol=1e-6)
            finally:
                self.assertEqual(from_bin.stop(), 0)
            code, _, data = server.request("POST", "/v1/completions",
                                           {"model": "bert", "prompt": "x"})
            self.assertEqual(code, 400)
            self.assertIn("is an encoder: it serves /v1/embeddings", data["error"]["message"])
        finally:
            self.assertEqual(server.stop(), 0)

    def test_translation_equals_translator(self):
        d, _, _ = tt.marian()
        server = Server(d)
        try:
            texts = ["the cat sleeps.", "a big red dog runs quickly"]
            want = tfc.Translator(d, threads=1).translate(texts, beam=4, max_len=16)
            got = server.client().completions.create(model="marian", prompt=texts,
                                                     max_tokens=16, extra_body={"beam": 4})
            self.assertEqual([c.text for c in sorted(got.choices, key=lambda c: c.index)], want)
        finally:
            self.assertEqual(server.stop(), 0)


def _stream_and_leave(port: int, body: dict, key: str | None, out: list) -> None:
    """Opens a stream, reads its first event, and closes the socket mid-stream."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        data = json.dumps(body).encode()
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  f"\r\n{auth}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        got = b""
        while b"data: " not in got and len(got) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        out.append(got.split(b"\r\n", 1)[0])
    finally:
        s.close()


class Load(unittest.TestCase):
    """One small server: one row per step and a queue of 2."""

    @classmethod
    def setUpClass(cls):
        # A model slow enough that a 400-token request outlives its client's departure
        # by far (milliseconds per token), so every one of them must be cancelled.
        cls.slow = llama_dir("llama-slow", hidden=256, layers=4, positions=512)
        cls.server = Server(cls.slow, "--max-rows", "1", "--max-queue", "2",
                            "--shutdown-timeout", "5")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_overload_gets_429_and_accepted_requests_complete(self):
        s = self.server
        results = []
        gate = threading.Barrier(12)

        def one():
            gate.wait(30)
            results.append(s.request("POST", "/v1/completions",
                                     {"model": "llama-slow", "prompt": "the cat",
                                      "max_tokens": 60, "temperature": 0}, timeout=120))

        threads = [threading.Thread(target=one) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        self.assertEqual(len(results), 12)
        codes = sorted(r[0] for r in results)
        self.assertEqual(set(codes) - {200, 429}, set(), codes)
        self.assertIn(429, codes)
        self.assertIn(200, codes)
        for code, headers, data in results:
            if code == 429:
                self.assertEqual({k.lower(): v for k, v in headers.items()}.get("retry-after"), "1")
                self.assertEqual(data["error"]["type"], "rate_limit_error")
            else:
                self.assertIn(data["choices"][0]["finish_reason"], ("stop", "length"))
                self.assertGreater(data["usage"]["completion_tokens"], 0)
        self.assertEqual(s.metric("tfc_requests_total", '{route="/v1/completions",status="429"}'),
                         codes.count(429))

    def test_clients_that_leave_free_their_blocks(self):
        s = self.server
        before = s.metric("tfc_engine_requests_total", '{state="cancelled"}')
        heads: list = []
        threads = [threading.Thread(target=_stream_and_leave, args=(
            s.port, {"model": "llama-slow", "prompt": "the cat", "max_tokens": 400,
                     "temperature": 0, "stream": True}, None, heads)) for _ in range(20)]
        for t in threads:  # in waves the queue holds, so none gets 429
            t.start()
            t.join(60)
        self.assertEqual(len(heads), 20)
        self.assertTrue(all(h.endswith(b"200 OK") for h in heads), heads)
        deadline = time.time() + 30
        while time.time() < deadline:
            if (s.metric("tfc_requests_running") == 0 and s.metric("tfc_queue_depth") == 0
                    and s.metric("tfc_kv_blocks_used") == 0):
                break
            time.sleep(0.1)
        self.assertEqual(s.metric("tfc_kv_blocks_used"), 0)
        self.assertGreater(s.metric("tfc_kv_blocks_free"), 0)
        self.assertEqual(s.metric("tfc_engine_requests_total", '{state="cancelled"}') - before, 20)

    def test_sigterm_drains_and_exits_0(self):
        server = Server(llama_dir(), "--shutdown-timeout", "2")
        heads: list = []
        t = threading.Thread(target=_stream_and_leave, args=(
            server.port, {"model": "llama-chat", "prompt": "the cat", "max_tokens": 100,
                          "stream": True}, None, heads))
        t.start()
        t.join(60)
        t0 = time.time()
        self.assertEqual(server.stop(timeout=30), 0)
        self.assertLess(time.time() - t0, 30)


if __name__ == "__main__":
    unittest.main(verbosity=2)
