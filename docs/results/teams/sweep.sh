#!/usr/bin/env bash
# The team sweep of README.md, one repeat at a time (a sweep cut short has every team at the
# same number of repeats); finished runs are skipped (--resume), so it goes on where it stopped.
# usage: docs/results/teams/sweep.sh DOMAIN REPEATS [JOBS] [small|now]
#   small: the three main teams, trust against consensus (the larger domains)
#   now: the other teams under the service's policy (consensus-now), into budget/DOMAIN
set -euo pipefail
DOMAIN=$1; MAX=$2; JOBS=${3:-2}; SIZE=${4:-full}
here=$(cd "$(dirname "$0")" && pwd)
data=${SPORAL_DATASETS:-$here/../../../../shared/datasets}/al-cpl
OUT=$here/$DOMAIN
[[ $SIZE == now ]] && OUT=$here/budget/$DOMAIN
S="nice -n 10 sporal simulate --mode coverage --data $data --domain $DOMAIN --out $OUT --annotators 5 --jobs $JOBS --resume"
DIRECT1=direct,independent,independent,independent,independent
for R in $(seq 1 "$MAX"); do
  if [[ $SIZE == now ]]; then
    $S --repeats "$R" --noise 0.05 --policy trust,consensus-now
    $S --repeats "$R" --noise 0 --policy consensus-now
    $S --repeats "$R" --noise 0.05 --noise-model $DIRECT1 --policy trust,consensus-now
    $S --repeats "$R" --noise 0.1,0.1,0.1,0.1,0.3 --policy consensus-now,consensus-now-unweighted
  elif [[ $SIZE == small ]]; then
    $S --repeats "$R" --noise 0.1 --policy trust,consensus
    $S --repeats "$R" --noise 0.05 --noise-model $DIRECT1 --policy trust,consensus
    $S --repeats "$R" --noise 0.05 --policy trust,consensus
  else
    $S --repeats "$R" --noise 0.1 --policy trust,double,consensus
    $S --repeats "$R" --noise 0.05 --policy trust,double,consensus
    $S --repeats "$R" --noise 0 --policy consensus
    $S --repeats "$R" --noise 0.05 --noise-model $DIRECT1 --policy trust,consensus,consensus-nocheck
    $S --repeats "$R" --noise 0 --noise-model direct --policy trust,consensus,consensus-nocheck
    $S --repeats "$R" --noise 0.05,0.05,0.05,0.05,0.15 --policy consensus,consensus-unweighted
    $S --repeats "$R" --noise 0.1,0.1,0.1,0.1,0.3 --policy consensus,consensus-unweighted
  fi
  echo "repeat $R done $(date)"
done
