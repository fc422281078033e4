from rqueue.cli import main

main()
