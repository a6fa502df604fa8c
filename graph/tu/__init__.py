"""GraphCL on TU data sets: data, GIN encoder, SVM evaluation, the pretraining task and its command."""
