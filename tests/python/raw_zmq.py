"""A raw ZeroMQ peer for tests that play a hostile client: libzmq through
ctypes (the test interpreter has no pyzmq), so what it sends is exactly the
bytes a test wrote, never what the gt client library would send.
"""

import ctypes
import ctypes.util
import os
import pathlib

ZMQ_DEALER = 5
ZMQ_LINGER = 17
ZMQ_RCVTIMEO = 27
ZMQ_SNDTIMEO = 28
ZMQ_SNDHWM = 23
ZMQ_SNDMORE = 2
ZMQ_DONTWAIT = 1
ZMQ_CURVE_PUBLICKEY = 48
ZMQ_CURVE_SECRETKEY = 49
ZMQ_CURVE_SERVERKEY = 50

_lib = ctypes.CDLL(ctypes.util.find_library("zmq") or "libzmq.so.5", use_errno=True)
_lib.zmq_ctx_new.restype = ctypes.c_void_p
_lib.zmq_socket.restype = ctypes.c_void_p
_lib.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
_lib.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_lib.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
_lib.zmq_recv.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
_lib.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_lib.zmq_close.argtypes = [ctypes.c_void_p]
_lib.zmq_ctx_term.argtypes = [ctypes.c_void_p]


def _key_lines(path):
    """{"public-key": KEY, "secret-key": KEY} of a key file gt keygen wrote."""
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        field, _, key = line.partition(":")
        if field in ("public-key", "secret-key"):
            out[field] = key.strip()
    return out


def default_client_keys(env=None):
    """(client.key, dispatcher.pub) of the default key set (docs/SECURITY.md)
    that gt-dispatcher started with `env` (default: this process's) uses."""
    env = os.environ if env is None else env
    config = env.get("XDG_CONFIG_HOME") or os.path.join(env["HOME"], ".config")
    keys = pathlib.Path(config) / "gt" / "keys"
    return keys / "client.key", keys / "dispatcher.pub"


class Dealer:
    """One DEALER socket connected to `endpoint`: with `curve` (a client's
    .key and the dispatcher's .pub) over CURVE, else without keys. close()
    waits up to `linger_ms` for what was sent to leave."""

    def __init__(self, endpoint, timeout_ms=5000, linger_ms=30000, curve=None):
        self._ctx = _lib.zmq_ctx_new()
        self._sock = _lib.zmq_socket(self._ctx, ZMQ_DEALER)
        for option, value in ((ZMQ_LINGER, linger_ms), (ZMQ_RCVTIMEO, timeout_ms), (ZMQ_SNDTIMEO, timeout_ms),
                              (ZMQ_SNDHWM, 0)):
            v = ctypes.c_int(value)
            _lib.zmq_setsockopt(self._sock, option, ctypes.byref(v), ctypes.sizeof(v))
        if curve:
            own, server = _key_lines(curve[0]), _key_lines(curve[1])
            for option, key in ((ZMQ_CURVE_SERVERKEY, server["public-key"]), (ZMQ_CURVE_PUBLICKEY, own["public-key"]),
                                (ZMQ_CURVE_SECRETKEY, own["secret-key"])):
                if _lib.zmq_setsockopt(self._sock, option, key.encode(), len(key)) != 0:
                    raise OSError(ctypes.get_errno(), "zmq_setsockopt CURVE")
        if _lib.zmq_connect(self._sock, endpoint.encode()) != 0:
            raise OSError(ctypes.get_errno(), f"zmq_connect {endpoint}")

    def send(self, *frames):
        for i, frame in enumerate(frames):
            flags = ZMQ_SNDMORE if i + 1 < len(frames) else 0
            if _lib.zmq_send(self._sock, frame, len(frame), flags) < 0:
                raise OSError(ctypes.get_errno(), "zmq_send")

    def recv(self, size=1 << 20):
        """One frame, or None when nothing came within the timeout."""
        buf = ctypes.create_string_buffer(size)
        n = _lib.zmq_recv(self._sock, buf, size, 0)
        return None if n < 0 else buf.raw[:min(n, size)]

    def close(self):
        _lib.zmq_close(self._sock)
        _lib.zmq_ctx_term(self._ctx)


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def envelope(kind, name=None):
    """A gt.wire.Envelope (core/ir/wire.proto): kind = 1, name = 10 (raw bytes,
    so a test may put invalid UTF-8 there)."""
    out = b"\x08" + varint(kind)
    if name is not None:
        out += b"\x52" + varint(len(name)) + name
    return out


HELLO = 1
