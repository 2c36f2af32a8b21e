#!/bin/bash
# mkdata.sh DIR: a data root holding the decompressed Fashion-MNIST (FashionMNIST/raw/<4 IDX files>), copied from
# a good one (/root/.cache/gpubench/data, which gpubench filled from Debian's dataset-fashion-mnist).
rm -rf "$1"; mkdir -p "$1/FashionMNIST/raw"; cp /root/.cache/gpubench/data/FashionMNIST/raw/*-ubyte "$1/FashionMNIST/raw/"
