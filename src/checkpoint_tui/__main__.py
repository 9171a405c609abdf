from checkpoint_tui.cli import main

raise SystemExit(main())
