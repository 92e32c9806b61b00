"""The ``rlvr`` command line, the top layer: it imports the harness's commands and the trainers'
``rlvr train`` directly, and nothing imports it (``sandbox <- harness <- trainers <- cli``)."""
