"""What people read: the terminal summary, live progress, Allure results and Allure 3's config."""
