#!/bin/bash
# GPT-3 175B on 384 DGX H100 nodes, as scenarios/llm/gpt3-175b-3072.pbtxt
# describes it: the model of the GPT-3 paper (Brown et al. 2020, Table 2.1),
# TP 8 with sequence parallelism, PP 8 with one layer per virtual stage,
# distributed optimizer with overlapped gradient reduce-scatter and parameter
# all-gather. Megatron-LM flag names from megatron/training/arguments.py.
# The scenario models no dropout, hence --hidden-dropout 0 --attention-dropout 0
# (Megatron-LM's default is 0.1 each).
torchrun --nnodes 384 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 96 \
    --hidden-size 12288 \
    --num-attention-heads 96 \
    --seq-length 2048 \
    --max-position-embeddings 2048 \
    --tokenizer-type GPT2BPETokenizer \
    --vocab-file gpt2-vocab.json \
    --merge-file gpt2-merges.txt \
    --make-vocab-size-divisible-by 128 \
    --hidden-dropout 0 \
    --attention-dropout 0 \
    --tensor-model-parallel-size 8 \
    --sequence-parallel \
    --pipeline-model-parallel-size 8 \
    --num-layers-per-virtual-pipeline-stage 1 \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --overlap-param-gather \
    --micro-batch-size 2 \
    --global-batch-size 1536 \
    --bf16 \
    --lr 6.0e-5 \
    --min-lr 6.0e-6 \
    --lr-decay-style cosine \
    --weight-decay 0.1 \
    --clip-grad 1.0 \
    --train-iters 500000 \
    --data-path my-gpt3_00_text_document \
    --log-interval 100
