import pytest

from kerngen.cli import parser
from kerngen.core.params import Overrides
from kerngen.errors import ParamError, toml_value
from kerngen.families import FAMILIES, from_mapping, load
from kerngen.families.ntt.maths import max_layers

GOOD = {"name": "t", "family": "ntt", "n": 256, "q": 3329, "width": 16, "isa": "avx2"}


@pytest.mark.parametrize("change, key, words", [
    ({"q": 3328}, "q", "prime"),
    ({"q": 40961}, "q", "below 2^15"),
    ({"n": 100}, "n", "power of two"),
    ({"n": 1 << 25}, "n", "between 2 and 2^24"),
    ({"n": 1}, "n", "between 2 and 2^24"),
    ({"n": 8192, "q": 12289}, "q", "planned transform, which runs every layer"),  # 11 layers: blocks of 4
    ({"n": 2, "q": 11}, "q", "divisible by 4"),  # q-1 = 10: not even the one layer n = 2 needs
    ({"q": 7}, "q", "divisible"),          # q-1 = 6: one layer only, blocks far too large
    ({"colour": 3}, "colour", "unknown key"),
    ({"n": "256"}, "n", "must be"),
    ({"width": 128}, "width", "one of 16, 32, 64"),
    ({"width": 64}, "q", "at least 2^32"),
    ({"width": 64, "q": 4611686018427388039}, "q", "below 2^62"),  # the first prime above 2^62
    ({"width": 64, "q": 4611686018326724609, "mul": "montgomery"}, "mul", "needs 16 or 32-bit lanes"),
    ({"width": 64, "q": 4611686018326724609, "n": 4096, "layers": 13}, "layers", "between 9 and 12"),
    ({"width": "32"}, "width", "integer"),
    ({"width": 32, "q": 2147483777}, "q", "below 2^31"),  # prime, 2^7 | q - 1
    ({"width": 32, "q": 65537}, "q", "at least 2^20"),
    ({"width": 32, "q": 8380417, "layers": 9}, "layers", "between 5 and 8"),
    ({"isa": "neon"}, "isa", "avx2"),
    ({"isa": ["avx2", "scalar"]}, "isa", "needs width = 64"),
    ({"isa": ["auto", "sse"]}, "isa", "stands alone"),
    ({"mul": "karatsuba"}, "mul", "one of auto, montgomery, shoup"),
    ({"mul": "shoup", "q": 40961, "n": 256}, "q", "below 2^15"),  # too large for the lane at all
    ({"mul": "shoup", "q": 17921}, "mul", "q < 2^14"),  # prime, 2^9 | q - 1, but 4q leaves uint16
    ({"mul": "shoup", "reducer": "special"}, "reducer", "leave reducer at auto"),
    ({"width": 64, "q": 4611686018326724609, "reducer": "barrett"}, "reducer", "64-bit lanes are unsigned"),
    ({"q": 12289, "reducer": "special"}, "reducer", "no special form"),  # not Shoup's with auto: the reducer named
    ({"name": "k" * 101}, "name", "1 to 100 lower-case letters"),
    ({"name": "-k"}, "name", "the first a letter or digit"),
    ({"width": 64, "q": 4294967681, "n": 2, "isa": "scalar"}, "isa", "needs n >= 4"),
    ({"reduction": "lazy"}, "reduction", "one of"),
    ({"layers": 9}, "layers", "between 5 and 7"),
    ({"layers": 4}, "layers", "at least 5 so that base blocks have degree at most 8"),
    ({"name": "Bad Name"}, "name", "lower-case"),
    ({"family": "rsa"}, "family", "ntt"),
    ({"prefix": "9x"}, "prefix", "C identifier"),
])
def test_bad_ntt_parameters_name_the_key_and_rule(write_params, change, key, words):
    with pytest.raises(ParamError) as e:
        load(write_params({**GOOD, **change}))
    assert e.value.key == key
    assert words in str(e.value)


@pytest.mark.parametrize("width, q, isas", [
    (16, 3329, ("avx2", "sse")),
    (32, 8380417, ("avx2", "sse")),
    (64, 4611686018326724609, ("avx2", "scalar")),  # SSE's two 64-bit lanes are level with plain C
])
def test_auto_isa_is_the_measured_list_for_the_width(write_params, width, q, isas):
    p = load(write_params({**GOOD, "width": width, "q": q, "isa": "auto"}))
    assert p.isas == isas and [t.isa.name for t in p.targets] == list(isas)


def test_missing_key_is_named(write_params):
    table = dict(GOOD)
    del table["q"]
    with pytest.raises(ParamError, match="q: missing"):
        load(write_params(table))


def test_not_toml(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("n = = 3")
    with pytest.raises(ParamError, match="not valid TOML"):
        load(p)


def test_derived_layers_and_block_degree(write_params):
    p = load(write_params(GOOD))
    assert (p.layers, p.d, p.prefix, p.policy) == (7, 2, "kg_t", "index")
    assert max_layers(1024, 12289) == 10 and max_layers(256, 3457) == 6


@pytest.mark.parametrize("change, key, words", [
    ({"poly": "[233, 73, 0]"}, "poly", "reducible"),
    ({"poly": "[233, 74]"}, "poly", "constant term"),
    ({"poly": "[232, 74, 0]"}, "poly", "first exponent"),
    ({"poly": "[233, 0, 74]"}, "poly", "decreasing"),
    ({"m": 1}, "m", "between"),
])
def test_bad_gf2m_parameters(tmp_path, change, key, words):
    table = {"name": "g", "family": "gf2m", "m": 233, "poly": "[233, 74, 0]", "isa": "avx2", **change}
    text = "\n".join(f'{k} = "{v}"' if isinstance(v, str) and not v.startswith("[") else f"{k} = {v}"
                     for k, v in table.items())
    path = tmp_path / "g.toml"
    path.write_text(text + "\n")
    with pytest.raises(ParamError) as e:
        load(path)
    assert e.value.key == key and words in str(e.value)


@pytest.mark.parametrize("table, key", [
    ({**GOOD, "q": 3329.0}, "q"),
    ({**GOOD, "n": 256.0}, "n"),
    ({**GOOD, "width": 16.0}, "width"),
    ({**GOOD, "layers": 7.0}, "layers"),
    ({**GOOD, "q": True}, "q"),
    ({"name": "g", "family": "gf2m", "m": 233.0, "poly": [233, 74, 0], "isa": "avx2"}, "m"),
])
def test_an_integer_key_given_a_float_or_a_boolean_says_it_must_be_an_integer(table, key):
    """q = 3329.0 is refused for its type, not as if it were no prime."""
    with pytest.raises(ParamError) as e:
        from_mapping(table, "p.toml")
    assert e.value.key == key and e.value.rule == f"must be an integer, got {toml_value(table[key])}"


def test_fast_irreducibility_agrees_with_sympy():
    import random
    from sympy import Poly, Symbol
    from kerngen.families.gf2m.gf2x import is_irreducible
    x = Symbol("x")
    rng = random.Random(11)
    for _ in range(150):
        m = rng.randint(2, 40)
        exps = sorted({m, 0, *(rng.randint(1, m - 1) for _ in range(rng.randint(0, 3)))}, reverse=True)
        assert is_irreducible(exps) == Poly(sum(x**e for e in exps), x, modulus=2).is_irreducible, exps
    assert is_irreducible([571, 10, 5, 2, 0]) and is_irreducible([409, 87, 0]) and not is_irreducible([233, 73, 0])


FAMILY_OPTIONS = [(f.name, o) for f in FAMILIES.values() for o in f.options]


@pytest.mark.parametrize("command", ["emit", "test", "bench"])
@pytest.mark.parametrize("family, option", FAMILY_OPTIONS, ids=[o.name for _, o in FAMILY_OPTIONS])
def test_a_family_option_is_on_the_command_line_with_its_choices(command, family, option, capsys):
    """The command line takes each family's declared options: in --help with
    their choices, a bad value refused naming them, a good one reaching the
    family's key."""
    with pytest.raises(SystemExit):
        parser().parse_args([command, "--help"])
    assert f"--{option.name} {{{','.join(option.choices)}}}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser().parse_args([command, "x.toml", f"--{option.name}", "no-such-choice"])
    err = capsys.readouterr().err
    assert f"--{option.name}: invalid choice: 'no-such-choice'" in err
    assert all(repr(c) in err for c in option.choices)
    args = parser().parse_args([command, "x.toml", f"--{option.name}", option.choices[-1]])
    assert getattr(args, option.name) == option.choices[-1]


@pytest.mark.parametrize("option", FAMILIES["ntt"].options, ids=lambda o: o.name)
def test_an_ntt_option_replaces_its_key_and_only_takes_its_choices(option):
    table = {**GOOD, option.key: option.choices[0]}
    other = next(c for c in option.choices if c != option.choices[0])
    p = from_mapping(table, "t", Overrides.of(**{option.name: other}))
    again = from_mapping({**table, option.key: other}, "t")
    assert p == again
    with pytest.raises(ParamError, match=f"must be one of {', '.join(option.choices)}, got \"x\" "
                                         f"from --{option.name}") as e:
        from_mapping(table, "t", Overrides.of(**{option.name: "x"}))
    assert e.value.key == option.key


def test_an_option_of_no_family_is_refused():
    with pytest.raises(ParamError, match="option of no family") as e:
        from_mapping(GOOD, "t", Overrides.of(colour="red"))
    assert e.value.key == "--colour"
