"""analysis/codec_pareto.py: the Pareto front and the figure."""
import pandas as pd
import pytest

from tierlab.analysis.codec_pareto import pareto_front, plot_codec_pareto

PNG = b"\x89PNG\r\n\x1a\n"


def _records():
    rows = []
    ours = {"base": (32.0, 0.3), "vbyte": (33.0, 1.5), "vbyte-delta": (9.0, 1.6),
            "svbyte-delta": (10.0, 0.6), "pfor-delta": (3.7, 1.4), "pfor-delta256": (3.6, 0.7)}
    peers = {"pyfastpfor/simdfastpfor256": (3.9, 2.2), "pyfastpfor/streamvbyte": (10.2, 1.0),
             "libstreamvbyte": (10.1, 9.5), "memcpy": (32.0, 0.2)}
    for dataset in ("clustered", "uniform"):
        for regime in ("per-block", "whole-list"):
            for lst in ("dids", "freqs"):
                for table, peer in ((ours, False), (peers, True)):
                    for codec, (bits, ns) in table.items():
                        rows.append(dict(codec=codec, peer=peer, dataset=dataset, list=lst,
                                         regime=regime, bits_per_int=bits,
                                         decode_ns_per_int=ns, error=None))
    # A failed codec: no numbers, must be left out, not crash the plot.
    rows.append(dict(codec="broken", peer=False, dataset="clustered", list="dids",
                     regime="per-block", bits_per_int=None, decode_ns_per_int=None,
                     error="encode returned -2"))
    return pd.DataFrame(rows)


def test_pareto_front_keeps_only_undominated():
    pts = pd.DataFrame({"codec": list("abcde"),
                        "bits_per_int": [3.6, 3.7, 9.0, 10.0, 32.0],
                        "decode_ns_per_int": [0.7, 1.4, 1.6, 0.6, 0.3]})
    assert list(pareto_front(pts)["codec"]) == ["a", "d", "e"]


def test_pareto_front_ties_keep_the_faster():
    pts = pd.DataFrame({"codec": ["slow", "fast"], "bits_per_int": [4.0, 4.0],
                        "decode_ns_per_int": [2.0, 1.0]})
    assert list(pareto_front(pts)["codec"]) == ["fast"]


def test_plot_writes_a_png(tmp_path):
    out = plot_codec_pareto(_records(), tmp_path / "fig" / "pareto.png", dpi=60)
    data = out.read_bytes()
    assert data[:8] == PNG and len(data) > 10_000
    assert not list(out.parent.glob(".*.tmp"))


@pytest.mark.parametrize("keep", [
    lambda df: df[(df["dataset"] == "uniform") & (df["regime"] == "per-block")],  # one panel
    lambda df: df[~df["peer"]],                                # no peers, no memcpy line
    lambda df: df[df["codec"] == "base"],                      # a single codec, no front
])
def test_plot_survives_partial_results(tmp_path, keep):
    out = plot_codec_pareto(keep(_records()), tmp_path / "p.png", dpi=40)
    assert out.read_bytes()[:8] == PNG
