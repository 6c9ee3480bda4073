from darrm_opt.cli import main

main()
