#!/bin/bash
# Slurm template: N nodes x 8 GPUs, one torchrun per node, FSDP2 over all ranks.
#   sbatch --nodes=2 recipes/distributed/slurm_multinode.sh recipes/distributed/gpu8_qwen7b.yaml [overrides]
# Batch knobs stay global (docs/distributed.md): with 16 ranks, global_batch / rollout.n prompts and
# train.mini_batch must divide by 16. Every node needs the same code, data paths and model cache.
#SBATCH --job-name=reasonrl
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --exclusive
set -euo pipefail
RECIPE=${1:?usage: sbatch slurm_multinode.sh RECIPE [overrides...]}
shift
HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR=$HEAD_NODE MASTER_PORT=${MASTER_PORT:-29500}
srun torchrun --nnodes "$SLURM_NNODES" --nproc-per-node 8 --rdzv-backend c10d \
  --rdzv-endpoint "$HEAD_NODE:$MASTER_PORT" --rdzv-id "$SLURM_JOB_ID" \
  -m reasonrl.cli.main train "$RECIPE" "$@" log.run_dir="runs/$SLURM_JOB_NAME-$SLURM_JOB_ID"
