"""Evidence as data: a finished run folder as a LeRobot dataset, and its results in an
experiment tracker (W&B, MLflow). Reads run folders only; lerobot, wandb and mlflow are
imported when asked for, never by the plugin's collection or a plain run."""
