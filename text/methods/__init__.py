"""Training methods of the text front-end."""
from text.methods.simcse import SimCSEConfig, sup_simcse_loss, train_simcse

__all__ = ["SimCSEConfig", "sup_simcse_loss", "train_simcse"]
