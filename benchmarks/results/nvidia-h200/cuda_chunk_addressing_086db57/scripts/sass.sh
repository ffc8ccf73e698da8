#!/bin/bash
# usage: sass.sh file.cu -> instruction stats
NVD=/tmp/nvd/x/nvidia/cu13/bin/nvdisasm
nvcc -arch=sm_90 -cubin -O3 -Xptxas -v -o /tmp/_s.cubin "$1" 2>&1 | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' '
$NVD -c /tmp/_s.cubin > /tmp/_s.sass
echo "instr $(grep -c '^\s*/\*[0-9a-f]*\*/' /tmp/_s.sass) LDG $(grep -c LDG /tmp/_s.sass) predLDG $(grep -c '@!\?P[0-9] LDG' /tmp/_s.sass) BRA $(grep -c BRA /tmp/_s.sass) BAR $(grep -c 'BAR' /tmp/_s.sass)"
