"""The ``gnn_dist.train`` command line is generated from the config: its flags are frozen here
(a new or renamed flag changes this test on purpose), every flag sets its field, the CLI and the
Python API share one set of defaults, and ``--config run.toml`` sets any field, flags winning."""

from __future__ import annotations

import dataclasses

import pytest

from gnn_dist.config import ModelConfig, RunConfig, TrainerConfig
from gnn_dist.config_cli import UsageError, build_parser, field_docs, flag_names, parse_run_config

FLAGS = [
    "--activation", "--attn-dropout", "--backend", "--boundary-sample-rate", "--checkpoint-dir",
    "--checkpoint-every", "--chunk-by", "--chunks", "--config", "--data", "--decoder", "--dropout", "--edge-dim", "--embedding-dim", "--epochs", "--eval-every", "--eval-negatives", "--feature-cache-budget",
    "--feature-cache-policy", "--feature-storage", "--first-layer-chunk-rows", "--halo-bits", "--halo-bits-every",
    "--halo-dtype", "--halo-grad-dtype", "--heads", "--help",
    "--hidden", "--history-smoothing", "--hits-k", "--import", "--input-dropout", "--jk", "--keep-checkpoints", "--kernels", "--layers", "--log-every", "--loss", "--lr",
    "--max-memory", "--metrics", "--model", "--no-static-halo", "--no-verify", "--num-bases", "--offload-activations", "--optimizer", "--out-heads",
    "--overlap-chunks", "--parallel", "--patience", "--pipeline", "--precision", "--precompute-first-layer", "--quiet", "--recompute",
    "--repartition-on-resize", "--resume",
    "--resume-any-partition", "--sage-init", "--save-model", "--seed", "--select", "--simulate-link", "--stages", "--stale-smoothing",
    "--target-type", "--task", "--tensorboard",
    "--timeout", "--validate", "--verbose", "--weight-decay",
]


def test_the_flags_are_frozen():
    assert flag_names() == FLAGS


def _leaves(cls, prefix=()):
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory):
            yield from _leaves(f.default_factory, prefix + (f.name,))
        else:
            yield prefix + (f.name,), f, cls


def test_every_field_has_a_flag_a_docstring_and_the_api_default():
    defaults = RunConfig(data=RunConfig().data.__class__(data="d"))
    for path, f, owner in _leaves(RunConfig):
        assert f.metadata.get("flag"), f"{'.'.join(path)} has no flag"
        assert field_docs(owner).get(f.name), f"{'.'.join(path)} has no docstring"
    parsed, _ = parse_run_config(["--data", "d"])
    assert parsed == defaults, "the command line's defaults are the dataclasses'"
    api = TrainerConfig.from_fields()
    assert api == parsed.trainer and api.optim.weight_decay == 5e-4 and api.report.log_every == 10


@pytest.mark.parametrize("argv, path, value", [
    (["--lr", "0.5"], ("trainer", "optim", "lr"), 0.5),
    (["--no-static-halo"], ("trainer", "features", "static_halo"), False),
    (["--precompute-first-layer"], ("trainer", "features", "precompute_first_layer"), "on"),
    (["--precompute-first-layer", "off"], ("trainer", "features", "precompute_first_layer"), "off"),
    ([], ("trainer", "features", "precompute_first_layer"), "auto"),
    (["--feature-cache-budget", "0.25"], ("trainer", "features", "feature_cache_budget"), 0.25),
    (["--feature-cache-budget", "4GB"], ("trainer", "features", "feature_cache_budget"), "4GB"),
    (["--checkpoint-dir", "c", "--resume"], ("trainer", "checkpoint", "resume"), "auto"),
    (["--checkpoint-dir", "c", "--resume", "latest"], ("trainer", "checkpoint", "resume"), "latest"),
    (["--no-verify"], ("data", "verify"), False),
    (["--kernels", "torch"], ("distributed", "kernels"), "torch"),
    (["--overlap-chunks", "0", "--pipeline", "overlap"], ("trainer", "schedule", "overlap_chunks"), 0),
    (["--input-dropout", "0.6"], ("model", "input_dropout"), 0.6),
    (["--input-dropout", "0.5", "--precompute-first-layer"], ("model", "input_dropout"), 0.5),
    (["--activation", "elu"], ("model", "activation"), "elu"),
    (["--model", "sage", "--sage-init", "concat"], ("model", "sage_init"), "concat"),
    (["--model", "resgcn", "--jk", "cat"], ("model", "jk"), "cat"),
    (["--model", "gat", "--attn-dropout", "0.6"], ("model", "attn_dropout"), 0.6),
    (["--model", "gat", "--out-heads", "8"], ("model", "out_heads"), 8),
    (["--select", "best-val"], ("trainer", "selection", "select"), "best-val"),
    (["--patience", "100"], ("trainer", "selection", "patience"), 100),
    (["--parallel", "layer", "--stages", "2", "--chunks", "4", "--chunk-by", "graph"],
     ("trainer", "parallel", "chunk_by"), "graph"),
])
def test_each_flag_sets_its_field(argv, path, value):
    config, _ = parse_run_config(["--data", "d", *argv])
    got = config
    for name in path:
        got = getattr(got, name)
    assert got == value


@pytest.mark.parametrize("argv, message", [
    (["--attn-dropout", "0.6"], r"--attn-dropout: 0\.6 applies to models gat, not 'gcn'"),
    (["--sage-init", "concat"], r"--sage-init: concat applies to models sage, not 'gcn'"),
    (["--out-heads", "2", "--model", "sage"], r"--out-heads: 2 applies to models gat, not 'sage'"),
    (["--input-dropout", "1"], r"--input-dropout: 1\.0 is not valid: expected a probability in \[0, 1\)"),
    (["--model", "gat", "--attn-dropout", "-0.1"], r"--attn-dropout: -0\.1 is not valid"),
    (["--select", "best-val", "--eval-every", "0"], r"--select: best-val needs evaluations, but eval_every = 0"),
    (["--patience", "5", "--eval-every", "0"], r"--patience: 5 counts evaluations, but eval_every = 0"),
    (["--patience", "0"], r"--patience: 0 is not valid: expected an integer >= 1"),
    (["--select", "best"], r"argument --select: invalid choice: 'best'"),
    (["--precompute-first-layer", "yes"], r"argument --precompute-first-layer: invalid choice: 'yes'"),
    (["--activation", "tanh"], r"argument --activation: invalid choice: 'tanh'"),
    (["--model", "gcnii", "--jk", "max"], r"--jk: 'max' applies to models .*resgcn.*, not 'gcnii'; leave it at"),
    (["--model", "gat", "--hidden", "30"], r"--hidden: 30 is the total width of a gat layer and must be a multiple "
                                           r"of heads = 8"),
])
def test_the_recipe_flags_refuse_bad_values_in_one_line(argv, message):
    with pytest.raises(UsageError, match=message) as exc:
        parse_run_config(["--data", "d", *argv])
    assert "\n" not in str(exc.value)


def test_a_config_file_sets_fields_and_flags_win(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('epochs = 7\n[data]\ndata = "parts/x"\n[model]\nmodel = "gat"\nhidden = 32\nheads = 4\n'
                    '[trainer.optim]\nlr = 0.005\n[trainer.schedule]\npipeline = "overlap"\n')
    config, _ = parse_run_config(["--config", str(toml), "--lr", "0.1"])
    assert (config.epochs, config.data.data, config.model, config.trainer.optim.lr,
            config.trainer.schedule.pipeline) == (7, "parts/x", ModelConfig(model="gat", hidden=32, heads=4),
                                                  0.1, "overlap")
    toml.write_text('[model]\nmodel = "gat"\ninput_dropout = 0.6\nattn_dropout = 0.6\nactivation = "elu"\n'
                    'out_heads = 2\n[trainer.selection]\nselect = "best-val"\npatience = 100\n')
    config, _ = parse_run_config(["--config", str(toml), "--data", "d", "--patience", "50"])
    assert (config.model.input_dropout, config.model.attn_dropout, config.model.activation, config.model.out_heads,
            config.trainer.selection.select, config.trainer.selection.patience) == (0.6, 0.6, "elu", 2, "best-val", 50)
    toml.write_text('[model]\nhidden = 30\nmodel = "gat"\nheads = 4\n')
    with pytest.raises(UsageError, match=r"run\.toml: model\.hidden: 30 is the total width of a gat layer and must "
                                         r"be a multiple of heads = 4"):
        parse_run_config(["--config", str(toml), "--data", "d"])
    toml.write_text('[trainer.optim]\nlr = "fast"\n')
    with pytest.raises(UsageError, match=r"run\.toml: trainer\.optim\.lr: 'fast' is not valid: expected a positive"):
        parse_run_config(["--config", str(toml), "--data", "d"])
    toml.write_text('[trainer]\npipelne = "sync"\n')
    with pytest.raises(UsageError, match=r"run\.toml: trainer\.pipelne is not a configuration field"):
        parse_run_config(["--config", str(toml), "--data", "d"])
    toml.write_text("[trainer\n")
    with pytest.raises(UsageError, match=r"run\.toml: not valid TOML"):
        parse_run_config(["--config", str(toml), "--data", "d"])
    with pytest.raises(UsageError, match=r"--config .*missing\.toml: cannot read it"):
        parse_run_config(["--config", str(tmp_path / "missing.toml"), "--data", "d"])


def test_the_help_is_the_field_docstrings(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Halo-exchange schedule of training steps: sync (exchange, then compute; exact)" in out
    assert "(default: 0.0005)" in out
    assert "for gat the total width of a hidden layer, heads x per-head width, so a multiple of the heads" in out
    for flag in ("--input-dropout P", "--attn-dropout P", "--out-heads K", "--patience K"):
        assert flag in out
    assert "--select {last,best-val}" in out and "--activation {relu,elu,gelu,leaky_relu}" in out


def test_the_launchers_help_shows_every_training_flag_grouped(capsys):
    from gnn_dist_cli.command import main as gnn_dist

    assert gnn_dist(["train", "--help"]) == 0
    out = capsys.readouterr().out
    titles = ["data:", "model:", "task:", "optimisation:", "schedule (when halo rows travel):", "input features:",
              "memory:", "processes and kernels:", "layer parallelism:", "checkpoints:", "output:"]
    at = [out.index("\n" + title + "\n") for title in titles]
    assert at == sorted(at)                           # the groups, in this order
    for flag in FLAGS:                                # every flag of gnn_dist.train, once the launcher's are listed
        assert flag in out, flag
    assert out.index("\n  --epochs") > out.index("optimisation:") and out.index("\n  --checkpoint-dir") > out.index("checkpoints:")


def test_abbreviations_are_refused_and_the_nearest_flag_named():
    with pytest.raises(UsageError, match=r"unrecognized arguments: --hid 16 --epoch 2 \(did you mean: --hid -> --hidden, "
                                         r"--epoch -> --epochs\?\)"):
        parse_run_config(["--data", "d", "--hid", "16", "--epoch", "2"])
