"""Conformance: operator dunders, __eq__/__hash__, __contains__, __len__/__bool__, augmented
assignment on attributes and subscripts, context managers."""

import pytest
from conformance import case

OPERATORS = [
    case(
        "binary_dunders",
        """
        def f():
            class V:
                def __init__(self, *c):
                    self.c = c
                def __add__(self, o):
                    return V(*(a + b for a, b in zip(self.c, o.c)))
                def __sub__(self, o):
                    return V(*(a - b for a, b in zip(self.c, o.c)))
                def __mul__(self, k):
                    return V(*(a * k for a in self.c))
                def __matmul__(self, o):
                    return sum(a * b for a, b in zip(self.c, o.c))
                def __truediv__(self, k):
                    return V(*(a / k for a in self.c))
                def __floordiv__(self, k):
                    return V(*(a // k for a in self.c))
                def __mod__(self, k):
                    return V(*(a % k for a in self.c))
                def __pow__(self, k):
                    return V(*(a ** k for a in self.c))
                def __neg__(self):
                    return V(*(-a for a in self.c))
                def __pos__(self):
                    return self
                def __abs__(self):
                    return V(*(abs(a) for a in self.c))
                def __invert__(self):
                    return V(*(~a for a in self.c))
            a, b = V(1, 2), V(3, -4)
            return [(a + b).c, (a - b).c, (a * 3).c, a @ b, (b / 2).c, (b // 3).c, (b % 3).c, (a ** 2).c, (-a).c, (+a).c, abs(b).c, (~a).c]
        """,
    ),
    case(
        "bitwise_dunders",
        """
        def f():
            class B:
                def __init__(self, v):
                    self.v = v
                def __and__(self, o):
                    return ("and", self.v, o)
                def __or__(self, o):
                    return ("or", self.v, o)
                def __xor__(self, o):
                    return ("xor", self.v, o)
                def __lshift__(self, o):
                    return ("lshift", self.v, o)
                def __rshift__(self, o):
                    return ("rshift", self.v, o)
            b = B(1)
            return [b & 2, b | 3, b ^ 4, b << 5, b >> 6]
        """,
    ),
    case(
        "reflected_dunders",
        """
        def f():
            class R:
                def __radd__(self, o):
                    return ("radd", o)
                def __rsub__(self, o):
                    return ("rsub", o)
                def __rmul__(self, o):
                    return ("rmul", o)
                def __rtruediv__(self, o):
                    return ("rtruediv", o)
                def __rpow__(self, o):
                    return ("rpow", o)
                def __rmatmul__(self, o):
                    return ("rmatmul", o)
            r = R()
            return [1 + r, 2 - r, "s" * r if False else 3 * r, 4 / r, 5 ** r, [1] @ r]
        """,
    ),
    case(
        "reflected_subclass_priority",
        """
        def f():
            class A:
                def __add__(self, o):
                    return "A.add"
                def __radd__(self, o):
                    return "A.radd"
            class B(A):
                def __radd__(self, o):
                    return "B.radd"
            return A() + B(), B() + A()
        """,
    ),
    case(
        "notimplemented_falls_back",
        """
        def f():
            class A:
                def __add__(self, o):
                    return NotImplemented
            class B:
                def __radd__(self, o):
                    return "B handled"
            return A() + B()
        """,
    ),
    case(
        "unsupported_operand_error",
        """
        def f():
            class A:
                pass
            return A() + 1
        """,
    ),
    case(
        "unsupported_operand_builtin_types",
        """
        def f():
            out = []
            for a, b in [(1, "a"), ([], 1.5), (None, None), ({}, {})]:
                try:
                    a - b
                except TypeError as e:
                    out.append(str(e))
            return out
        """,
    ),
    case(
        "inplace_dunders",
        """
        def f():
            class Acc:
                def __init__(self):
                    self.log = []
                def __iadd__(self, o):
                    self.log.append(("iadd", o))
                    return self
                def __imul__(self, o):
                    self.log.append(("imul", o))
                    return self
                def __isub__(self, o):
                    return "replaced"
            a = Acc()
            orig = a
            a += 1
            a *= 2
            same = a is orig
            a -= 3
            return orig.log, same, a
        """,
    ),
    case(
        "inplace_falls_back_to_binary",
        """
        def f():
            class N:
                def __init__(self, v):
                    self.v = v
                def __add__(self, o):
                    return N(self.v + o)
            n = N(1)
            m = n
            n += 5
            return n.v, m.v, n is m
        """,
    ),
    case(
        "inplace_on_list_vs_tuple",
        """
        def f():
            a = [1]
            b = a
            a += [2]
            t = (1,)
            u = t
            t += (2,)
            return a, b, t, u, a is b, t is u
        """,
    ),
    case(
        "rich_comparison_dunders",
        """
        def f():
            class C:
                def __init__(self, v):
                    self.v = v
                def __lt__(self, o):
                    return self.v < o.v
                def __le__(self, o):
                    return self.v <= o.v
                def __eq__(self, o):
                    return isinstance(o, C) and self.v == o.v
                def __ne__(self, o):
                    return not self == o
                def __gt__(self, o):
                    return self.v > o.v
                def __ge__(self, o):
                    return self.v >= o.v
            a, b = C(1), C(2)
            return [a < b, a <= b, a == b, a != b, a > b, a >= b, a == C(1), sorted([b, a])[0].v]
        """,
    ),
    case(
        "comparison_reflection",
        """
        def f():
            class A:
                def __gt__(self, o):
                    return "A.gt"
            class B:
                pass
            return B() < A(), A() > 1, 1 < A()
        """,
    ),
    case(
        "comparison_unsupported",
        """
        def f():
            class A:
                pass
            return A() < A()
        """,
    ),
    case(
        "eq_default_identity_and_ne",
        """
        def f():
            class A:
                pass
            a = A()
            return a == a, a == A(), a != A(), a != a
        """,
    ),
    case(
        "eq_and_hash_in_sets_and_dicts",
        """
        def f():
            class K:
                def __init__(self, k):
                    self.k = k
                def __eq__(self, o):
                    return isinstance(o, K) and self.k.lower() == o.k.lower()
                def __hash__(self):
                    return hash(self.k.lower())
            s = {K("a"), K("A"), K("b")}
            d = {K("x"): 1}
            d[K("X")] = 2
            return len(s), len(d), d[K("x")], K("B") in s
        """,
    ),
    case(
        "eq_without_hash_unhashable",
        """
        def f():
            class A:
                def __eq__(self, o):
                    return True
            return {A()}
        """,
    ),
    case(
        "hash_none_explicit",
        """
        def f():
            class A:
                __hash__ = None
            try:
                hash(A())
            except TypeError as e:
                return str(e)
        """,
    ),
    case(
        "contains_dunder",
        """
        def f():
            class Evens:
                def __contains__(self, x):
                    return x % 2 == 0
            e = Evens()
            return 4 in e, 3 in e, 3 not in e
        """,
    ),
    case(
        "contains_falls_back_to_iter",
        """
        def f():
            class It:
                def __iter__(self):
                    return iter([1, 2, 3])
            return 2 in It(), 5 in It()
        """,
    ),
    case(
        "contains_returns_truthy_value",
        """
        def f():
            class C:
                def __contains__(self, x):
                    return [x]
            return 0 in C(), type(0 in C()).__name__
        """,
    ),
    case(
        "len_and_bool",
        """
        def f():
            class Empty:
                def __len__(self):
                    return 0
            class Full:
                def __len__(self):
                    return 3
            class No:
                def __bool__(self):
                    return False
                def __len__(self):
                    return 10
            return bool(Empty()), bool(Full()), len(Full()), bool(No()), "yes" if No() else "no", not Empty()
        """,
    ),
    case(
        "len_negative_error",
        """
        def f():
            class Bad:
                def __len__(self):
                    return -1
            return len(Bad())
        """,
    ),
    case(
        "bool_returns_non_bool_error",
        """
        def f():
            class Bad:
                def __bool__(self):
                    return 1
            if Bad():
                return "truthy"
        """,
    ),
    case(
        "len_of_unsized",
        """
        def f():
            return len(5)
        """,
    ),
    case(
        "getitem_setitem_delitem",
        """
        def f():
            class Store:
                def __init__(self):
                    self.d = {}
                    self.log = []
                def __getitem__(self, k):
                    self.log.append(("get", k))
                    return self.d[k]
                def __setitem__(self, k, v):
                    self.log.append(("set", k, v))
                    self.d[k] = v
                def __delitem__(self, k):
                    self.log.append(("del", k))
                    del self.d[k]
            s = Store()
            s["a"] = 1
            s["a"] += 10
            v = s["a"]
            del s["a"]
            return v, s.log
        """,
    ),
    case(
        "call_dunder",
        """
        def f():
            class Mul:
                def __init__(self, k):
                    self.k = k
                def __call__(self, x, *, extra=0):
                    return x * self.k + extra
            m = Mul(3)
            return m(2), m(2, extra=1), callable(m), list(map(m, [1, 2]))
        """,
    ),
    case(
        "index_int_float_complex_dunders",
        """
        def f():
            class N:
                def __int__(self):
                    return 7
                def __float__(self):
                    return 2.5
                def __index__(self):
                    return 3
                def __complex__(self):
                    return 1j
            n = N()
            return int(n), float(n), complex(n), bin(n), [0, 1, 2, 3][n], round(2.567, 2)
        """,
    ),
    case(
        "format_and_round_dunders",
        """
        def f():
            class M:
                def __format__(self, spec):
                    return "M[" + spec + "]"
                def __round__(self, n=None):
                    return ("round", n)
            return f"{M():>5}", format(M(), "x"), round(M()), round(M(), 2)
        """,
    ),
    case(
        "augassign_attribute",
        """
        def f():
            class O:
                pass
            o = O()
            o.n = 1
            o.n += 4
            o.n *= 3
            o.n -= 1
            o.n //= 2
            o.n **= 2
            o.n %= 10
            o.s = "a"
            o.s += "b"
            return o.n, o.s
        """,
    ),
    case(
        "augassign_subscript_evaluates_once",
        """
        def f():
            log = []
            def key(k):
                log.append(k)
                return k
            d = {"a": 1}
            xs = [1, 2, 3]
            d[key("a")] += 5
            xs[key(1)] *= 10
            xs[key(-1)] <<= 2
            return d, xs, log
        """,
    ),
    case(
        "augassign_nested_targets",
        """
        def f():
            class O:
                pass
            o = O()
            o.items = {"k": [1, 2]}
            o.items["k"][0] += 100
            o.items["k"] += [3]
            return o.items
        """,
    ),
    case(
        "augassign_tuple_item_in_list_error",
        """
        def f():
            t = ([1],)
            try:
                t[0] += [2]
            except TypeError as e:
                return str(e), t
        """,
    ),
    case(
        "augassign_all_operators",
        """
        def f():
            x = 100
            out = []
            for op in range(12):
                if op == 0: x += 3
                elif op == 1: x -= 1
                elif op == 2: x *= 7
                elif op == 3: x //= 4
                elif op == 4: x %= 97
                elif op == 5: x **= 2
                elif op == 6: x >>= 1
                elif op == 7: x <<= 3
                elif op == 8: x &= 0xFFF
                elif op == 9: x |= 0x10
                elif op == 10: x ^= 0x5
                else: x /= 8
                out.append(x)
            return out
        """,
    ),
]

CONTEXT_MANAGERS = [
    case(
        "with_basic_enter_exit",
        """
        def f():
            log = []
            class CM:
                def __enter__(self):
                    log.append("enter")
                    return "value"
                def __exit__(self, t, v, tb):
                    log.append(("exit", t))
                    return False
            with CM() as v:
                log.append(v)
            return log
        """,
    ),
    case(
        "with_exception_passed_to_exit",
        """
        def f():
            seen = []
            class CM:
                def __enter__(self):
                    return self
                def __exit__(self, t, v, tb):
                    seen.append((t.__name__, str(v), tb is not None))
                    return False
            try:
                with CM():
                    raise ValueError("inside")
            except ValueError as e:
                return seen, str(e)
        """,
    ),
    case(
        "with_suppresses_exception",
        """
        def f():
            class Suppress:
                def __enter__(self):
                    return self
                def __exit__(self, t, v, tb):
                    return t is not None and issubclass(t, KeyError)
            with Suppress():
                {}["missing"]
            after = "continued"
            return after
        """,
    ),
    case(
        "with_exit_raises_new_exception",
        """
        def f():
            class CM:
                def __enter__(self):
                    return self
                def __exit__(self, t, v, tb):
                    raise RuntimeError("from exit")
            try:
                with CM():
                    raise ValueError("body")
            except RuntimeError as e:
                return str(e), type(e.__context__).__name__, str(e.__context__)
        """,
    ),
    case(
        "with_exit_raises_escaping",
        """
        def f():
            class CM:
                def __enter__(self):
                    return self
                def __exit__(self, *a):
                    raise KeyError("exit-error")
            with CM():
                raise ValueError("body")
        """,
    ),
    case(
        "with_enter_raises",
        """
        def f():
            log = []
            class CM:
                def __enter__(self):
                    raise OSError("cannot enter")
                def __exit__(self, *a):
                    log.append("exit called")
            try:
                with CM():
                    log.append("body")
            except OSError as e:
                return str(e), log
        """,
    ),
    case(
        "with_multiple_managers_order",
        """
        def f():
            log = []
            class CM:
                def __init__(self, n):
                    self.n = n
                def __enter__(self):
                    log.append("enter " + self.n)
                    return self.n
                def __exit__(self, *a):
                    log.append("exit " + self.n)
            with CM("a") as a, CM("b") as b:
                log.append(a + b)
            with (CM("c") as c,
                  CM("d")):
                log.append(c)
            return log
        """,
    ),
    case(
        "with_return_inside_calls_exit",
        """
        def f():
            log = []
            class CM:
                def __enter__(self):
                    return self
                def __exit__(self, *a):
                    log.append("exit")
            def g():
                with CM():
                    return "returned"
            return g(), log
        """,
    ),
    case(
        "with_break_continue_inside_loop",
        """
        def f():
            log = []
            class CM:
                def __init__(self, i):
                    self.i = i
                def __enter__(self):
                    return self
                def __exit__(self, *a):
                    log.append(("exit", self.i))
            for i in range(5):
                with CM(i):
                    if i == 1:
                        continue
                    if i == 3:
                        break
                    log.append(i)
            return log
        """,
    ),
    case(
        "with_no_enter_error",
        """
        def f():
            class NotCM:
                pass
            with NotCM():
                pass
        """,
    ),
    case(
        "contextlib_contextmanager",
        """
        import contextlib
        def f():
            log = []
            @contextlib.contextmanager
            def tag(name):
                log.append("<" + name + ">")
                try:
                    yield name.upper()
                finally:
                    log.append("</" + name + ">")
            with tag("a") as x, tag("b") as y:
                log.append(x + y)
            try:
                with tag("c"):
                    raise ValueError("oops")
            except ValueError:
                log.append("caught")
            return log
        """,
    ),
    case(
        "contextlib_suppress_and_exitstack",
        """
        import contextlib
        def f():
            log = []
            with contextlib.suppress(ZeroDivisionError):
                1 / 0
            with contextlib.ExitStack() as stack:
                for i in range(3):
                    stack.callback(log.append, i)
                log.append("body")
            return log
        """,
    ),
    case(
        "contextmanager_generator_suppresses",
        """
        import contextlib
        def f():
            @contextlib.contextmanager
            def swallow():
                try:
                    yield
                except LookupError as e:
                    print("swallowed", type(e).__name__)
            with swallow():
                [][1]
            return "after"
        """,
    ),
]

CASES = OPERATORS + CONTEXT_MANAGERS


@pytest.mark.parametrize("snippet", CASES)
def test_dunders(snippet):
    snippet.assert_ok()
