reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,360 noenhanced font "sans,10"
} else {
  set terminal png size 1200,360 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-06-vm-codecomplete-rss.png"
set multiplot layout 1,1 title "RSS (MiB) over each server's run of each workload"
set xlabel "seconds"
set ylabel "MiB"
set key bottom right
set title "codecomplete"
plot "/work/main/bench/results/2026-12-06-vm-codecomplete-plots/rss-codecomplete-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-06-vm-codecomplete-plots/rss-codecomplete-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
unset multiplot
