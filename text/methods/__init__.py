"""Training methods of the text front-end."""
from text.methods.simcse import LOSS_PRESETS, SimCSEConfig, sup_simcse_loss, train_simcse

__all__ = ["LOSS_PRESETS", "SimCSEConfig", "sup_simcse_loss", "train_simcse"]
