"""utils/training.py: the training's length in steps, and its learning-rate schedule."""

import keras
import numpy as np
import pytest

from utils import training


@pytest.mark.parametrize(
    "global_batch_size, steps_per_execution, epoch_steps, total_steps",
    [
        (16, 16, 128, 768),  # 1 replica: 125 steps an epoch, rounded up to 8 executions.
        (128, 16, 16, 96),  # 8 replicas: 16 steps an epoch, one execution each.
        (1024, 16, 2, 12),  # 64 replicas: steps_per_execution capped to the epoch's 2 steps.
    ],
    ids=["1 replica", "8 replicas", "64 replicas"],
)
def test_plan_training_sets_length_in_images(
    global_batch_size, steps_per_execution, epoch_steps, total_steps
):
    plan = training.plan_training(
        training_images=12_000,
        global_batch_size=global_batch_size,
        epochs=6,
        steps_per_execution=steps_per_execution,
    )
    assert (plan.steps_per_epoch, plan.total_steps) == (epoch_steps, total_steps)
    assert plan.steps_per_execution <= plan.steps_per_epoch
    assert plan.steps_per_epoch % plan.steps_per_execution == 0
    assert plan.warmup_steps == round(0.1 * total_steps)
    assert plan.images_seen == total_steps * global_batch_size >= 12_000


@pytest.mark.parametrize(
    "global_batch_size, total_steps",
    [(16, 768), (32, 384), (64, 288), (128, 288)],  # 12,000 / 48 = 250: 6 x 48 steps.
    ids=["1 replica", "2 replicas", "4 replicas", "8 replicas"],
)
def test_plan_training_counts_steps_at_most_at_the_critical_batch(global_batch_size, total_steps):
    plan = training.plan_training(
        training_images=12_000,
        global_batch_size=global_batch_size,
        epochs=6,
        steps_per_execution=16,
        critical_batch_size=48,
    )
    assert plan.total_steps == total_steps
    assert plan.warmup_steps == round(0.1 * total_steps)


def test_plan_training_describe_names_steps_images_and_warmup():
    plan = training.plan_training(
        training_images=12_000, global_batch_size=128, epochs=6, steps_per_execution=16
    )
    assert plan.describe() == (
        "Training: 96 steps of 128 images (12,288 images seen), 6 epochs of 16 steps, "
        "warm-up 10 steps, steps_per_execution 16"
    )


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(epochs=0), r"`epochs` must be a positive integer. Received: epochs=0"),
        (dict(global_batch_size=2.5), r"Received: global_batch_size=2.5"),
        (dict(warmup_fraction=1.0), r"Received: warmup_fraction=1.0"),
        (dict(critical_batch_size=0), r"`critical_batch_size` must be a positive integer"),
    ],
    ids=["no epochs", "fractional batch", "all warm-up", "negative critical batch"],
)
def test_plan_training_rejects_bad_input(arguments, message):
    settings = dict(training_images=1000, global_batch_size=16, epochs=2)
    with pytest.raises(ValueError, match=message):
        training.plan_training(**{**settings, **arguments})


def test_warmup_cosine_rises_to_the_peak_then_falls_to_zero():
    plan = training.plan_training(training_images=1600, global_batch_size=16, epochs=2)
    schedule = training.warmup_cosine(0.002, plan)
    rates = [float(schedule(step)) for step in range(plan.total_steps + 1)]
    assert rates[0] == 0.0
    assert rates[plan.warmup_steps] == pytest.approx(0.002)
    assert max(rates) == pytest.approx(0.002)
    assert rates[-1] == pytest.approx(0.0, abs=1e-9)
    assert np.all(np.diff(rates[plan.warmup_steps :]) <= 1e-12)  # Only falls after the peak.
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert float(restored(plan.warmup_steps)) == pytest.approx(0.002)


def test_learning_rate_log_puts_the_rate_in_the_history():
    plan = training.plan_training(training_images=64, global_batch_size=8, epochs=2)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(training.warmup_cosine(0.1, plan)), loss="mse")
    data = np.ones((8, 2), np.float32), np.ones((8, 1), np.float32)
    history = model.fit(
        *data,
        epochs=plan.epochs,
        steps_per_epoch=plan.steps_per_epoch,
        callbacks=[training.LearningRateLog()],
        verbose=0,
    )
    rates = history.history["learning_rate"]
    assert len(rates) == 2 and all(isinstance(rate, float) for rate in rates)
    assert rates[1] == pytest.approx(0.0, abs=1e-9)  # The last step's rate: the cosine's end.


def _fixed_model():
    """A model answering class 0 for input [1, 0] and class 2 for [0, 1], whatever it learns."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, use_bias=False)])
    model.layers[0].set_weights([np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], "float32")])
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.0), loss="categorical_crossentropy"
    )
    return model


def test_validation_answers_counts_the_models_answers_at_each_epochs_end():
    import tensorflow as tf

    inputs = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], "float32")
    labels = keras.utils.to_categorical([0, 2, 1, 2], 3)  # The third is answered wrong.
    validation = tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(3)
    answers = training.ValidationAnswers(validation)
    model = _fixed_model()
    history = model.fit(
        validation, epochs=2, validation_data=validation, callbacks=[answers], verbose=0
    )
    assert history.history[training.ANSWERS_KEY] == [0.75, 0.75]
    assert list(answers.labels) == [0, 2, 1, 2]
    assert answers.share_right(model) == 0.75


def test_plot_history_draws_training_and_validation_curves():
    history = type("History", (), {})()
    history.history = {
        "loss": [1.5, 1.0, 0.7],
        "val_loss": [1.6, 1.2, 0.9],
        "accuracy": [0.3, 0.5, 0.7],
        "val_accuracy": [0.3, 0.45, 0.6],
    }
    figure = training.plot_history(history, title="t")
    loss, accuracy = figure.axes
    assert [line.get_label() for line in loss.get_lines()] == ["training", "validation"]
    assert list(accuracy.get_lines()[1].get_ydata()) == [0.3, 0.45, 0.6]


def test_plot_history_draws_the_answers_counted_where_the_history_has_them():
    history = type("History", (), {})()
    history.history = {
        "loss": [1.5, 1.0],
        "accuracy": [0.3, 0.5],
        "val_accuracy": [0.2, 0.4],
        training.ANSWERS_KEY: [0.35, 0.8],
    }
    _, accuracy = training.plot_history(history).axes
    assert [line.get_label() for line in accuracy.get_lines()] == [
        "training",
        "validation (answers)",
    ]
    assert list(accuracy.get_lines()[1].get_ydata()) == [0.35, 0.8]


def test_plot_history_without_accuracy_names_the_keys_it_has():
    history = type("History", (), {"history": {"loss": [1.0], "val_loss": [1.1]}})()
    with pytest.raises(ValueError) as error:
        training.plot_history(history)
    assert str(error.value) == (
        "The history holds no 'accuracy': it holds ['loss', 'val_loss']. Compile with "
        "metrics=['accuracy'] and pass what fit() returns."
    )
