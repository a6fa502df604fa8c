"""Molecules: featurisation and MoleculeNet data, splits, the GIN of Hu et al., pretraining, fine-tuning, ROC-AUC."""
