"""The runner: suite files (:mod:`~benchmarks.runner.suitefile`), running them (:mod:`~benchmarks.runner.run`,
``suite bench run``), comparing a user's loss with the seed losses (:mod:`~benchmarks.runner.compare`, ``suite bench
compare``) and converting registries of earlier versions (:mod:`~benchmarks.runner.migrate`)."""
