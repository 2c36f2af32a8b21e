"""What more than one workload uses: models, the training loop, precision helpers, the epoch's
parts, the launch of a multi-process case. A workload module imports these, never a sibling
workload's internals."""
