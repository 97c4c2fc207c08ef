#!/usr/bin/env bash
# The GPU figures recorded in docs/distributed.md, docs/rollouts.md and docs/design.md, one part at a
# time (each part stays under ten minutes on one H100). Logs and JSON lines go to $DIR (default
# gpu-figures/). Needs CUDA, torch, transformers and reasonrl importable (PYTHONPATH=. works).
# With 15 minutes of device time (machine start included), run `next` first: the open GPU questions.
#   bash bench/gpu_figures.sh next       # ~8 min: packed + compiled profiled, 0.5B MFU without the entropy
#                                        # metric, soft-capped blocks and sinks on CUDA
#   bash bench/gpu_figures.sh train      # MFU grid: 0.5B / 1.5B, 2k-8k, checkpointing off / on, FSDP2 world 1
#   bash bench/gpu_figures.sh compile    # the same with model.compile (compiled decoder layers) vs bare eager
#   bash bench/gpu_figures.sh pack       # uneven completions: padded vs packed (model.pack_tokens), 0.5B / 1.5B
#   bash bench/gpu_figures.sh packprofile  # why packed + compiled ran 0.89x of padded: both profiled, eager too
#   bash bench/gpu_figures.sh rollout    # HF engine vs generate vs continuous batching, 0.5B / 1.5B
#   bash bench/gpu_figures.sh demo       # the demo recipe on CUDA: single device, then FSDP2 under torchrun
#   bash bench/gpu_figures.sh eval       # reasonrl eval vs the raw HF engine (and lm-eval if installed) on CUDA
#   bash bench/gpu_figures.sh sinks      # attention sinks through SDPA vs written out / eager, packed and padded
set -u
DIR=${DIR:-gpu-figures}
RUNS=${RUNS:-$DIR}  # run directories of the demo part (checkpoints): keep them out of a small $OUT
mkdir -p "$DIR" "$RUNS"
export PYTHONUNBUFFERED=1
run() {  # run NAME TIMEOUT CMD...: output to $DIR/NAME.log, the last JSON line appended to $DIR/figures.jsonl
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*"
    timeout "$limit" "$@" > "$DIR/$name.log" 2>&1
    echo "   exit $? ($name)"
    grep -v '^\s*$' "$DIR/$name.log" | grep -E '^(.*: [0-9.]+ s/step|hf |cb |step [0-9]+/|.*out of memory|log-probs|reasonrl eval|packed |padded |.*Error)' | tail -20
    grep '^{' "$DIR/$name.log" | tail -1 >> "$DIR/figures.jsonl"
}
T=bench/gpu_train_step.py
R=bench/rollout_throughput.py
case "${1:-train}" in
next)
    # why packed + compiled ran 0.89x of padded (0.5B, 4k, checkpointing): both profiled, 2 steps
    run pack_05b_compiled_profile 200 python $T --preset qwen2.5-0.5b --seqs 4096 --ckpt on --chunk 256 --pack 16384 \
        --compile --profile 15 --steps 2
    # 0.5B compiled reached 31.1% MFU at 2k with the entropy metric (7% of the step eager): without it?
    run train_05b_compile_noentropy 150 python $T --preset qwen2.5-0.5b --seqs 2048 --ckpt off --chunk 256 --compile \
        --entropy off
    run softcap_4k 90 python bench/lean_attention.py --kind softcap --device cuda --rows 8 --length 4096 --reps 2
    run sinks_4k 90 python bench/lean_attention.py --kind sinks --device cuda --rows 8 --length 4096 --reps 2
    ;;
train)
    run train_05b 150 python $T --preset qwen2.5-0.5b --seqs 2048,4096,8192 --ckpt off,on --chunk 256 --bare
    run train_05b_logits 90 python $T --preset qwen2.5-0.5b --seqs 2048,4096 --ckpt off --chunk 0
    run train_05b_noentropy 60 python $T --preset qwen2.5-0.5b --seqs 4096 --ckpt off --chunk 256 --entropy off
    run train_15b 240 python $T --preset qwen2.5-1.5b --seqs 2048,4096,8192 --ckpt off,on --chunk 256 --bare
    run train_15b_micro32k 90 python $T --preset qwen2.5-1.5b --seqs 4096,8192 --ckpt on --chunk 256 \
        --tokens-per-micro 32768
    run train_05b_fsdp2 90 python $T --preset qwen2.5-0.5b --engine fsdp2 --seqs 4096 --ckpt off,on --chunk 256
    run train_15b_fsdp2 120 python $T --preset qwen2.5-1.5b --engine fsdp2 --seqs 4096 --ckpt off,on --chunk 256
    ;;
compile)
    run train_05b_compile 300 python $T --preset qwen2.5-0.5b --seqs 2048,4096,8192 --ckpt off --chunk 256 --bare \
        --compile
    run train_15b_compile 240 python $T --preset qwen2.5-1.5b --seqs 2048,4096 --ckpt off --chunk 256 --bare --compile
    run train_15b_fsdp2_compile 150 python $T --preset qwen2.5-1.5b --engine fsdp2 --seqs 4096 --ckpt off,on \
        --chunk 256 --compile
    ;;
pack)
    run pack_05b 240 python $T --preset qwen2.5-0.5b --seqs 2048,8192 --ckpt off --chunk 256 --pack 16384
    run pack_15b 240 python $T --preset qwen2.5-1.5b --seqs 4096 --ckpt off,on --chunk 256 --pack 16384
    ;;
packprofile)
    run pack_05b_compiled_profile 240 python $T --preset qwen2.5-0.5b --seqs 4096 --ckpt on --chunk 256 --pack 16384 \
        --compile --profile 15
    run pack_05b_eager_profile 150 python $T --preset qwen2.5-0.5b --seqs 4096 --ckpt on --chunk 256 --pack 16384 \
        --profile 15
    ;;
rollout)
    run rollout_05b 240 python $R --engines hf --preset qwen2.5-0.5b --prompts 16 --n 8 --new 512 --repeats 2
    # continuous batching ran at 0.28x of generate (H100, transformers 5.19): 128 tokens keep it in time
    run rollout_05b_cb 150 python $R --engines cb --preset qwen2.5-0.5b --prompts 16 --n 8 --new 128 --repeats 1
    # 1.5B: 42 s per 128 x 512-token call, so 128 tokens
    run rollout_15b 200 python $R --engines hf --preset qwen2.5-1.5b --prompts 16 --n 8 --new 128 --repeats 2
    # real lengths (completions end at EOS): the decode loop's dropped rows and its every-8th-step check
    run rollout_demo 240 python $R --engines hf --model demo:addsub --prompts 64 --n 8 --new 48
    ;;
demo)
    run demo_single 400 python -m reasonrl train recipes/demo.yaml model.device=cuda log.run_dir="$RUNS/demo_single"
    run demo_fsdp2 150 torchrun --nproc-per-node 1 -m reasonrl train recipes/demo.yaml model.device=cuda \
        train.engine=fsdp2 train.steps=100 val.every=50 checkpoint.every=50 log.run_dir="$RUNS/demo_fsdp2"
    ;;
eval)
    run eval_demo 300 python bench/eval_throughput.py --device cuda --problems 1024 --batch 256
    ;;
sinks)
    run sinks_4k 300 python bench/lean_attention.py --kind sinks --device cuda --rows 8 --length 4096
    run softcap_4k 300 python bench/lean_attention.py --kind softcap --device cuda --rows 8 --length 4096
    ;;
esac
