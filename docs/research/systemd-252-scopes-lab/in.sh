#!/bin/bash
# usage: in.sh NAME cmd...
NAME=$1; shift
exec nsenter -t $(cat /work/nspawn-lab/$NAME.pid) -a "$@"
